package ops

import (
	"github.com/fencegate/fencegate/guard"
)

// GuardReport is one guarded table in JSON (list, status).
type GuardReport struct {
	Table        string `json:"table"`
	Resource     string `json:"resource,omitempty"`
	ResourceExpr string `json:"resource_expr,omitempty"`
	Enabled      bool   `json:"enabled"`
}

// GuardReports is gs as reports.
func GuardReports(gs []guard.Guard) []GuardReport {
	out := make([]GuardReport, 0, len(gs))
	for _, g := range gs {
		out = append(out, GuardReport{Table: g.Table, Resource: g.Resource, ResourceExpr: g.ResourceExpr, Enabled: g.Enabled})
	}
	return out
}

// ResourceText is what the guard fences by, for a table: its resource, or
// "= " and its resource expression.
func (g GuardReport) ResourceText() string {
	if g.Resource != "" {
		return g.Resource
	}
	return "= " + g.ResourceExpr
}

// StateText says whether the guard's trigger is on, for a table.
func (g GuardReport) StateText() string {
	if !g.Enabled {
		return "DISABLED (not guarded)"
	}
	return "guarded"
}
