package integration

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/pgsql"
)

// EnvMutants turns on TestMutants.
const EnvMutants = "FENCEGATE_MUTANTS"

// mutant is one file of mutants/: a deliberate bug the suite must report.
type mutant struct {
	name     string
	kills    []string // the check kinds of which one must fire
	dialects []sqlstore.Dialect
	skip     string             // why it is not run here
	faults   []string           // faults beyond the short history's own: "oscrash"
	ci       []sqlstore.Dialect // the dialects CI runs it on (FENCEGATE_MUTANTS=ci); none: not in CI
	duration time.Duration      // its history's length; 0 for the short history's 15 s
	workload string             // the history it runs: one of mutantWorkloads ("" is "ordinary")
	edits    []edit
}

// mutantWorkloads are the histories a mutant can name (its "workload:"
// line): the ordinary leases', or one of the tests that run what the
// ordinary history leaves out, at the size those tests give them.
var mutantWorkloads = map[string]func(sqlstore.Dialect, uint64) spec{
	"ordinary": mutantSpec,
	// Five electors' processes, two agents each: elections, and a
	// semaphore's two permits contended by ten. One of each fault, as the
	// ordinary mutant history: a killed waiter's place blocks the line for
	// a second, and with three kills on Postgres the line let so few
	// through that the semaphore-n-plus-1 mutant once survived.
	"electors": func(d sqlstore.Dialect, seed uint64) spec {
		sp := electorsSpec(d, seed, 5)
		sp.Agents = 2
		sp.Kills, sp.Pauses, sp.LeaderPauses = 1, 1, 1
		sp.Cuts, sp.CommitCuts, sp.Delays = min(sp.Cuts, 1), min(sp.CommitCuts, 1), min(sp.Delays, 1)
		return sp
	},
	// Claims of several resources and of paths, judged by check.Claims.
	"claims": claimsSpec,
	// Writers that skip the gate, on a table guarded (package guard) by
	// the mutant's own worker: every write that commits is a guard's
	// failure, and the stale ones show. Ten seconds: the control's.
	"guarded": func(d sqlstore.Dialect, seed uint64) spec {
		sp := guardedSpec(d, seed)
		sp.Duration = 10 * time.Second
		return sp
	},
}

// mutantSpec is the ordinary history at a mutant's size: the CI history,
// shorter, with one of each fault. One server crash mid-run (and one
// before the check): what only a restart shows, a sequence that was not
// logged, say, must show.
func mutantSpec(dialect sqlstore.Dialect, seed uint64) spec {
	sp := ciSpec(dialect, seed)
	sp.Duration, sp.Kills, sp.Pauses, sp.Restarts = 15*time.Second, 1, 1, 1
	if sp.Cuts > 0 {
		sp.Cuts, sp.CommitCuts = 1, 1
	}
	return sp
}

// edit replaces old, which must occur exactly once in file, by new.
type edit struct{ file, old, new string }

// parseMutant reads the format mutants/README.md describes.
func parseMutant(name, text string) (mutant, error) {
	m := mutant{name: name}
	lines := strings.SplitAfter(text, "\n")
	for i := 0; i < len(lines); i++ {
		line := strings.TrimRight(lines[i], "\n")
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "kills: "):
			m.kills = strings.Fields(strings.TrimPrefix(line, "kills: "))
		case strings.HasPrefix(line, "dialects: "):
			for _, d := range strings.Fields(strings.TrimPrefix(line, "dialects: ")) {
				m.dialects = append(m.dialects, sqlstore.Dialect(d))
			}
		case strings.HasPrefix(line, "faults: "):
			m.faults = strings.Fields(strings.TrimPrefix(line, "faults: "))
			for _, f := range m.faults {
				if f != "oscrash" && f != "failover-advance" && f != "clocksteps" {
					return m, fmt.Errorf("%s: unknown fault %q", name, f)
				}
			}
		case strings.HasPrefix(line, "ci: "):
			for _, d := range strings.Fields(strings.TrimPrefix(line, "ci: ")) {
				m.ci = append(m.ci, sqlstore.Dialect(d))
			}
		case strings.HasPrefix(line, "duration: "):
			d, err := time.ParseDuration(strings.TrimPrefix(line, "duration: "))
			if err != nil || d <= 0 {
				return m, fmt.Errorf("%s: duration %q: want a positive duration", name, strings.TrimPrefix(line, "duration: "))
			}
			m.duration = d
		case strings.HasPrefix(line, "workload: "):
			m.workload = strings.TrimPrefix(line, "workload: ")
			if _, ok := mutantWorkloads[m.workload]; !ok {
				return m, fmt.Errorf("%s: unknown workload %q", name, m.workload)
			}
		case strings.HasPrefix(line, "skip: "):
			m.skip = strings.TrimPrefix(line, "skip: ")
		case strings.HasPrefix(line, "--- "):
			e := edit{file: strings.TrimPrefix(line, "--- ")}
			var part *string
			for i++; i < len(lines); i++ {
				switch strings.TrimRight(lines[i], "\n") {
				case "<<<":
					part = &e.old
					continue
				case "===":
					part = &e.new
					continue
				}
				if strings.TrimRight(lines[i], "\n") == ">>>" {
					break
				}
				if part == nil {
					return m, fmt.Errorf("%s: text outside <<< … >>> after %q", name, line)
				}
				*part += lines[i]
			}
			if e.old == "" {
				return m, fmt.Errorf("%s: an edit of %s with no old text", name, e.file)
			}
			m.edits = append(m.edits, e)
		default:
			return m, fmt.Errorf("%s: cannot read line %q", name, line)
		}
	}
	if len(m.kills) == 0 || len(m.dialects) == 0 || len(m.edits) == 0 {
		return m, fmt.Errorf("%s: want kills, dialects and at least one edit", name)
	}
	for _, d := range m.ci {
		if !slices.Contains(m.dialects, d) {
			return m, fmt.Errorf("%s: ci names %s, which is not among its dialects", name, d)
		}
	}
	return m, nil
}

// fastPathOff turns Postgres's fast acquisition path off (fencegate_grant,
// tried first outside a transaction): every acquisition runs the full
// fencegate_acquire, whose grant branch the fast path otherwise reaches only
// in a rare race. TestMutants runs half of a Postgres mutant's workers with
// it.
var fastPathOff = edit{
	file: "sqlstore/internal/sqlexec/queries.go",
	old:  "\tc.leaseAcquireFirst = q.LeaseAcquireAutocommit\n",
	new:  "\tc.leaseAcquireFirst = \"\"\n",
}

// buildMutant writes the mutated copies of m's files to dir and builds
// fgworker with them as an overlay. An edit whose old text is not in its
// file exactly once is an error: the mutant no longer applies. With dir
// empty it only checks that m applies.
func buildMutant(m mutant, dir string) (string, error) {
	root, err := filepath.Abs("..")
	if err != nil {
		return "", err
	}
	replace := map[string]string{}
	texts := map[string]string{}
	for _, e := range m.edits {
		path := filepath.Join(root, filepath.FromSlash(e.file))
		text, ok := texts[path]
		if !ok {
			b, err := os.ReadFile(path)
			if err != nil {
				return "", fmt.Errorf("mutant %s: %w", m.name, err)
			}
			text = string(b)
		}
		if n := strings.Count(text, e.old); n != 1 {
			return "", fmt.Errorf("mutant %s no longer applies: its old text occurs %d times in %s, want once:\n%s", m.name, n, e.file, e.old)
		}
		texts[path] = strings.Replace(text, e.old, e.new, 1)
	}
	if dir == "" {
		return "", nil // only checked that it applies
	}
	for path, text := range texts {
		copyPath := filepath.Join(dir, strings.ReplaceAll(strings.TrimPrefix(path, root), string(filepath.Separator), "_"))
		if err := os.WriteFile(copyPath, []byte(text), 0o644); err != nil {
			return "", err
		}
		replace[path] = copyPath
	}
	overlay, err := json.Marshal(map[string]any{"Replace": replace})
	if err != nil {
		return "", err
	}
	overlayPath := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(overlayPath, overlay, 0o644); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "fgworker")
	if runtime.GOOS == "windows" {
		bin += ".exe"
	}
	out, err := exec.Command("go", "build", "-overlay", overlayPath, "-o", bin, "./cmd/fgworker").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("mutant %s does not build: %v\n%s", m.name, err, out)
	}
	return bin, nil
}

// TestMutants runs every mutant of mutants/ as one short history per
// dialect it names and requires the checker to report it. Opt-in with
// FENCEGATE_MUTANTS=1; FENCEGATE_MUTANTS=ci runs the subset CI runs (each
// mutant's "ci" dialects), every mutant still built, so that one whose
// text no longer applies fails.
func TestMutants(t *testing.T) {
	mode := os.Getenv(EnvMutants)
	if mode != "1" && mode != "ci" {
		t.Skipf("opt-in: set %s=1 to run the mutants (ci: the CI subset)", EnvMutants)
	}
	for _, m := range loadMutants(t) {
		if mode == "ci" && len(m.ci) == 0 {
			continue // not in the CI subset; TestMutantsApply checks it still applies
		}
		t.Run(m.name, func(t *testing.T) {
			bin, err := buildMutant(m, t.TempDir())
			if err != nil {
				t.Fatal(err) // loudly: an overlay that no longer applies is a failure
			}
			if m.skip != "" {
				t.Skipf("built, not run: %s", m.skip)
			}
			dialects := m.dialects
			if mode == "ci" {
				dialects = m.ci
			}
			for _, dialect := range dialects {
				t.Run(string(dialect), func(t *testing.T) {
					sp := mutantWorkloads[cmp.Or(m.workload, "ordinary")](dialect, baseSeed(t))
					sp.Worker = bin
					if dialect == pgsql.Dialect {
						slow := m
						slow.edits = append(slices.Clone(m.edits), fastPathOff)
						alt, err := buildMutant(slow, t.TempDir())
						if err != nil {
							t.Fatal(err)
						}
						sp.WorkerAlt = alt
						sp.BeginStalls = 0.25 // a fence that holds no row from BEGIN shows only in a stall
					}
					if m.duration > 0 {
						sp.Duration = m.duration
					}
					if slices.Contains(m.faults, "oscrash") {
						sp.OSCrashes = len(osCrashAfter) // one after each kind of acknowledgement
					}
					sp.ClockSteps = 0 // each step leaves the machine's clock ahead until it is slewed back
					if slices.Contains(m.faults, "clocksteps") {
						sp.ClockSteps = 10
					}
					if slices.Contains(m.faults, "failover-advance") {
						// TestFailoverAsynchronousAdvanced's history: the
						// failover is its crash (a restart before it would
						// leave no WAL sender to freeze).
						sp.Duration, sp.Failover, sp.AsyncStandby, sp.AdvanceFences, sp.LagGrants = 20*time.Second, true, true, true, lagGrants
						sp.Restarts = 0
					}
					o := runHistory(t, sp)
					record("mutant/"+m.name+"/"+string(dialect), o)
					by := o.Report.ByCheck()
					if o.Claims != nil {
						for k, n := range claimChecks(o.Claims) {
							by[k] += n
						}
					}
					t.Logf("mutant %s on %s: %v", m.name, dialect, by)
					if !slices.ContainsFunc(m.kills, func(k string) bool { return by[k] > 0 }) {
						t.Errorf("mutant %s survived on %s: none of %v reported (violations %v)\n%s\nelections and semaphores: %+v", m.name, dialect, m.kills, by, describe(o), o.Report.Coord)
					}
				})
			}
		})
	}
}

// TestMutantsApply runs in every suite run, without the opt-in: every
// mutant file parses and its edits still apply.
func TestMutantsApply(t *testing.T) {
	if _, err := buildMutant(mutant{name: "fast path off", edits: []edit{fastPathOff}}, ""); err != nil {
		t.Error(err)
	}
	for _, m := range loadMutants(t) {
		if _, err := buildMutant(m, ""); err != nil {
			t.Error(err)
		}
	}
}

// loadMutants parses every mutant file; one that does not parse fails the
// test.
func loadMutants(t *testing.T) []mutant {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("mutants", "*.mutant"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no mutants found: %v", err)
	}
	var ms []mutant
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		m, err := parseMutant(strings.TrimSuffix(filepath.Base(file), ".mutant"), string(b))
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	return ms
}
