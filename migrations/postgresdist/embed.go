package postgresdist

import (
	"embed"
	"io/fs"
)

//go:embed *.sql
var files embed.FS

// FS returns the migrations, the .sql files at its root as goose expects.
func FS() fs.FS { return files }
