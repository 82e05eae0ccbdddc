package fencegatecli

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/lease"
)

// --metrics-addr serves the library's instruments, fed by the command's
// own gate and coordinator, until the command ends.
func TestMetricsAddrServesTheLibrarysMetrics(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := filepath.Join(t.TempDir(), "fencegate.db")
	var stderr bytes.Buffer
	c := &cli{stdout: io.Discard, stderr: &stderr, env: func(k string) string {
		if k == envDSN {
			return dsn
		}
		return ""
	}}
	tel, err := c.startTelemetry(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c.tel = tel
	b, err := c.open(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	contains(t, "stderr", stderr.String(), "fencegate: metrics at http://"+tel.addr.String()+"/metrics")

	// A grant, and a refusal of a fence the coordinator never issued.
	client, err := lease.NewClient(&lease.ClientOptions{Holder: "agent-a"})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := client.BeginAcquire("metrics/slot")
	if out, err := b.Coord.Acquire(ctx, req); err != nil || !out.OK {
		t.Fatalf("Acquire: %+v, %v", out, err)
	}
	if err := b.Gate.Admit(ctx, fence.Token{Resource: "metrics/slot", Holder: "forger", Fence: 99}); !errors.Is(err, gate.ErrStaleFence) {
		t.Fatalf("Admit of a forged fence: %v, want ErrStaleFence", err)
	}

	resp, err := http.Get("http://" + tel.addr.String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	page := string(body)
	// series reports whether page has a sample of name with every label.
	series := func(name string, labels ...string) bool {
		for _, line := range strings.Split(page, "\n") {
			if !strings.HasPrefix(line, name+"{") {
				continue
			}
			all := true
			for _, l := range labels {
				all = all && strings.Contains(line, l)
			}
			if all && !strings.HasSuffix(line, " 0") {
				return true
			}
		}
		return false
	}
	for _, want := range [][]string{
		{"fencegate_lease_acquire_duration_seconds_count", `outcome="granted"`},
		{"fencegate_gate_decisions_total", `operation="admit"`, `outcome="refused"`},
		{"fencegate_gate_refusals_total", `logged="true"`},
		{"target_info", `service_name="fencegate"`},
	} {
		if !series(want[0], want[1:]...) {
			t.Errorf("/metrics lacks %v:\n%s", want, page)
		}
	}
	if strings.Contains(page, "metrics/slot") {
		t.Errorf("/metrics names the resource without MetricsByResource:\n%s", page)
	}

	if err := tel.stop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get("http://" + tel.addr.String() + "/metrics"); err == nil {
		t.Error("/metrics still answers after the command ended")
	}
}

// With OTEL_EXPORTER_OTLP_ENDPOINT set, a command pushes its metrics and
// spans to the collector over OTLP/HTTP before it exits.
func TestOTLPExportsBeforeExit(t *testing.T) {
	var mu sync.Mutex
	paths := map[string]int{}
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths[r.Method+" "+r.URL.Path]++
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	defer collector.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL) // the exporters read the process's environment
	env := map[string]string{envDSN: filepath.Join(t.TempDir(), "fencegate.db"), "OTEL_EXPORTER_OTLP_ENDPOINT": collector.URL}
	fg(t, env, "claim", "--lock", "otlp/slot", "--holder", "agent-a").want(t, exitOK)
	mu.Lock()
	defer mu.Unlock()
	if paths["POST /v1/metrics"] == 0 || paths["POST /v1/traces"] == 0 {
		t.Errorf("the collector received %v, want metrics and traces", paths)
	}
}

// Exporting is asked for clearly or refused before anything runs.
func TestTelemetryBadSettings(t *testing.T) {
	t.Parallel()
	env := map[string]string{envDSN: filepath.Join(t.TempDir(), "fencegate.db")}
	r := fg(t, env, "--metrics-addr", "127.0.0.1:notaport", "status").want(t, exitError)
	contains(t, "stderr", r.stderr, "--metrics-addr")
	env["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://127.0.0.1:4318"
	env["OTEL_EXPORTER_OTLP_PROTOCOL"] = "grpc"
	r = fg(t, env, "status").want(t, exitUsage)
	contains(t, "stderr", r.stderr, "OTLP over HTTP only")
}
