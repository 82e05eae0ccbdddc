//go:build !unix

package fencegatecli

import "testing"

func mkfifo(t *testing.T, path string) {
	t.Skip("no named pipes here")
}
