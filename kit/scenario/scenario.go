// Package scenario reads the conformance kit's scenarios (kit/scenarios.json)
// and checks answers against their expectations, with the rules every
// runner follows (kit/README.md): the Go runner's half of the kit.
package scenario

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// File is kit/scenarios.json.
type File struct {
	Protocol  int        `json:"protocol"`
	Scenarios []Scenario `json:"scenarios"`
}

// Scenario is one named story of steps.
type Scenario struct {
	Name  string `json:"name"`
	About string `json:"about"`
	Steps []Step `json:"steps"`
}

// Step is one operation with its arguments, what its answer must match,
// and which of its answer's fields to keep under which variable names.
type Step struct {
	Op        string            `json:"op"`
	Resource  any               `json:"resource"`
	Resources []any             `json:"resources"`
	Holder    any               `json:"holder"`
	Fence     any               `json:"fence"`
	TTLms     any               `json:"ttl_ms"`
	RequestID *string           `json:"request_id"`
	Ms        int               `json:"ms"`
	Expect    map[string]any    `json:"expect"`
	Save      map[string]string `json:"save"`
}

// Load reads the scenarios from path.
func Load(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f File
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &f, nil
}

// Raw returns the bytes of a {"raw": kind} name: the bad names no JSON
// string can carry or no reader should have to count.
func Raw(kind string) (string, error) {
	switch kind {
	case "empty":
		return "", nil
	case "long": // one byte over fence.MaxNameLen (256)
		return strings.Repeat("x", 257), nil
	case "huge":
		return strings.Repeat("x", 5000), nil
	case "invalid_utf8":
		return "kit-\xff\xfe-bad", nil
	}
	return "", fmt.Errorf("unknown raw name %q", kind)
}

// Env is one scenario run's names and variables.
type Env struct {
	Prefix string         // resource aliases become Prefix + alias
	Vars   map[string]any // saved answers
}

// Name resolves a resource or holder argument: an alias (resources only),
// a literal, or {"raw": kind}.
func (e *Env) Name(v any, resource bool) (string, error) {
	switch v := v.(type) {
	case string:
		if resource {
			return e.Prefix + v, nil
		}
		return v, nil
	case map[string]any:
		if k, ok := v["raw"].(string); ok {
			return Raw(k)
		}
	}
	return "", fmt.Errorf("bad name argument %v", v)
}

// Int resolves a number argument: a literal or "$var".
func (e *Env) Int(v any) (int64, error) {
	v = e.value(v)
	if n, ok := toInt(v); ok {
		return n, nil
	}
	return 0, fmt.Errorf("not an integer: %v", v)
}

// value substitutes "$var" and "@alias".
func (e *Env) value(v any) any {
	if s, ok := v.(string); ok {
		if name, ok := strings.CutPrefix(s, "$"); ok {
			if x, ok := e.Vars[name]; ok {
				return x
			}
			return fmt.Sprintf("<unset variable %s>", name)
		}
		if alias, ok := strings.CutPrefix(s, "@"); ok {
			return e.Prefix + alias
		}
	}
	return v
}

var integer = regexp.MustCompile(`^-?[0-9]+$`)

func toInt(v any) (int64, bool) {
	switch v := v.(type) {
	case float64:
		return int64(v), v == float64(int64(v))
	case int64:
		return v, true
	case int:
		return int64(v), true
	case json.Number:
		n, err := v.Int64()
		return n, err == nil
	case string:
		if integer.MatchString(v) {
			n, err := strconv.ParseInt(v, 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// Check compares an answer with a step's expectation and returns what
// differs, one line per field ("" when it matches).
func (e *Env) Check(expect map[string]any, got map[string]any) []string {
	var bad []string
	keys := make([]string, 0, len(expect))
	for k := range expect {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		want := expect[k]
		g, present := got[k]
		if !present {
			if !(k == "error" && want == nil) {
				bad = append(bad, fmt.Sprintf("%s: missing, want %s (answer %s)", k, show(want), show(got)))
			}
			continue
		}
		bad = append(bad, e.match(k, want, g)...)
	}
	if _, ok := expect["error"]; !ok {
		if errv, ok := got["error"]; ok {
			bad = append(bad, fmt.Sprintf("error: got %s (%s), want none", show(errv), show(got["message"])))
		}
	}
	return bad
}

func (e *Env) match(path string, want, got any) []string {
	switch w := want.(type) {
	case map[string]any:
		if len(w) == 1 {
			if opts, ok := w["one_of"].([]any); ok {
				for _, o := range opts {
					if e.equal(o, got) {
						return nil
					}
				}
				return []string{fmt.Sprintf("%s: got %s, want one of %s", path, show(got), show(opts))}
			}
		}
		if isComparison(w) {
			var bad []string
			for _, op := range []string{"gt", "ge", "lt", "le", "ne"} {
				x, ok := w[op]
				if !ok {
					continue
				}
				if op == "ne" {
					if e.equal(x, got) {
						bad = append(bad, fmt.Sprintf("%s: got %s, want not %s", path, show(got), show(e.value(x))))
					}
					continue
				}
				a, ok1 := toInt(got)
				b, ok2 := toInt(e.value(x))
				if !ok1 || !ok2 || !map[string]bool{"gt": a > b, "ge": a >= b, "lt": a < b, "le": a <= b}[op] {
					bad = append(bad, fmt.Sprintf("%s: got %s, want %s %s", path, show(got), op, show(e.value(x))))
				}
			}
			return bad
		}
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: got %s, want an object", path, show(got))}
		}
		var bad []string
		for k, x := range w {
			bad = append(bad, e.match(path+"."+k, x, g[k])...)
		}
		return bad
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return []string{fmt.Sprintf("%s: got %s, want %d elements like %s", path, show(got), len(w), show(w))}
		}
		var bad []string
		for i := range w {
			bad = append(bad, e.match(fmt.Sprintf("%s.%d", path, i), w[i], g[i])...)
		}
		return bad
	}
	if !e.equal(want, got) {
		return []string{fmt.Sprintf("%s: got %s, want %s", path, show(got), show(e.value(want)))}
	}
	return nil
}

func isComparison(m map[string]any) bool {
	for k := range m {
		switch k {
		case "gt", "ge", "lt", "le", "ne":
		default:
			return false
		}
	}
	return len(m) > 0
}

// equal compares a literal (after "$var" and "@alias") with an answer:
// integers by value whatever their form, booleans with 0/1 and t/f.
func (e *Env) equal(want, got any) bool {
	want = e.value(want)
	if want == nil || got == nil {
		return want == nil && got == nil
	}
	if b, ok := want.(bool); ok {
		switch g := got.(type) {
		case bool:
			return g == b
		case string:
			return (b && (g == "t" || g == "true" || g == "1")) || (!b && (g == "f" || g == "false" || g == "0"))
		}
		if n, ok := toInt(got); ok {
			return (n != 0) == b
		}
		return false
	}
	if a, ok := toInt(want); ok {
		b, ok := toInt(got)
		return ok && a == b
	}
	ws, _ := want.(string)
	gs, ok := got.(string)
	return ok && ws == gs
}

// Save keeps the answer's fields a step names (a dotted path: rows.0.fence).
func (e *Env) Save(save map[string]string, got map[string]any) error {
	for name, path := range save {
		var v any = got
		for _, p := range strings.Split(path, ".") {
			switch x := v.(type) {
			case map[string]any:
				v = x[p]
			case []any:
				i, err := strconv.Atoi(p)
				if err != nil || i < 0 || i >= len(x) {
					return fmt.Errorf("save %s: no %s in %s", name, path, show(got))
				}
				v = x[i]
			default:
				return fmt.Errorf("save %s: no %s in %s", name, path, show(got))
			}
		}
		e.Vars[name] = v
	}
	return nil
}

func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
