//go:build !unix

package mcpserver

import "testing"

func mkfifo(t *testing.T, path string) {
	t.Skip("no named pipes here")
}
