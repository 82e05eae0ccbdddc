package main

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	xmodule "golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

const libraryPath = "github.com/fencegate/fencegate"

// unpublished are the modules that only serve this repository's own tests
// and tools (kit: the SQL protocol's conformance kit): nobody fetches them,
// so they may keep their replace directives.
var unpublished = []string{"bench", "integration", "kit", "release"}

// libraryDeps is every module the library module may require directly: the
// drivers of the three databases, goose and OpenTelemetry's API. The README
// says so ("What a program links"); SDKs, the MCP SDK, etcd, River and test
// peers belong in the modules that need them.
var libraryDeps = []string{
	"github.com/go-sql-driver/mysql",
	"github.com/jackc/pgx/v5",
	"github.com/pressly/goose/v3",
	"go.opentelemetry.io/otel",
	"go.opentelemetry.io/otel/metric",
	"go.opentelemetry.io/otel/trace",
	"modernc.org/sqlite",
}

// module is one go.mod of the repository.
type module struct {
	dir       string // relative to the repository root, "." for the root
	path      string
	published bool
	file      *modfile.File
	gomod     []byte
}

func readModules(root string) ([]module, error) {
	out, err := output(context.Background(), root, nil, "git", "ls-files", "-co", "--exclude-standard", "--", "go.mod", "*/go.mod")
	if err != nil {
		return nil, err
	}
	var mods []module
	for _, f := range strings.Fields(out) {
		dir := path.Dir(f)
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			return nil, err
		}
		mf, err := modfile.Parse(f, b, nil)
		if err != nil {
			return nil, err
		}
		mods = append(mods, module{
			dir: dir, path: mf.Module.Mod.Path, file: mf, gomod: b,
			published: !slices.Contains(unpublished, strings.Split(dir, "/")[0]),
		})
	}
	return mods, nil
}

// checkRequirements refuses a published module that requires one of ours at
// a version this release does not make, or replaces one: a user's go
// command ignores replace directives of a dependency, so such a module
// builds in the workspace and nowhere else.
func checkRequirements(mods []module, version string) error {
	ours := map[string]bool{}
	for _, m := range mods {
		ours[m.path] = m.published
	}
	var problems []string
	for _, m := range mods {
		if !m.published {
			continue
		}
		for _, r := range m.file.Require {
			published, ok := ours[r.Mod.Path]
			switch {
			case !ok:
			case !published:
				problems = append(problems, fmt.Sprintf("%s/go.mod requires %s, which is never published", m.dir, r.Mod.Path))
			case r.Mod.Version != version:
				problems = append(problems, fmt.Sprintf("%s/go.mod requires %s %s, a version this release does not publish (it publishes %s): set the requirement to %s",
					m.dir, r.Mod.Path, r.Mod.Version, version, version))
			}
		}
		for _, r := range m.file.Replace {
			if _, ok := ours[r.Old.Path]; ok {
				problems = append(problems, fmt.Sprintf("%s/go.mod replaces %s: its users' go command ignores that", m.dir, r.Old.Path))
			}
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("published modules that cannot be installed:\n  %s", strings.Join(problems, "\n  "))
	}
	return nil
}

// checkLibraryDeps keeps the library module's direct requirements to the
// ones a user of it expects.
func checkLibraryDeps(mods []module) error {
	for _, m := range mods {
		if m.path != libraryPath {
			continue
		}
		var extra []string
		for _, r := range m.file.Require {
			if !r.Indirect && !slices.Contains(libraryDeps, r.Mod.Path) {
				extra = append(extra, r.Mod.Path)
			}
		}
		if len(extra) > 0 {
			return fmt.Errorf("the library module requires %s directly: only %s belong there (move it to the module that needs it)",
				strings.Join(extra, ", "), strings.Join(libraryDeps, ", "))
		}
		return nil
	}
	return fmt.Errorf("no module %s in the repository", libraryPath)
}

// buildProxy writes, for each published module, the files a GOPROXY serves:
// @v/list, and the version's .info, .mod and .zip.
func (c *checker) buildProxy() error {
	stamp, err := output(context.Background(), c.root, nil, "git", "log", "-1", "--format=%cI")
	if err != nil {
		return err
	}
	at, err := time.Parse(time.RFC3339, strings.TrimSpace(stamp))
	if err != nil {
		return err
	}
	for _, m := range c.mods {
		if !m.published {
			continue
		}
		esc, err := xmodule.EscapePath(m.path)
		if err != nil {
			return err
		}
		dir := filepath.Join(c.proxyDir(), filepath.FromSlash(esc), "@v")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		info, _ := json.Marshal(struct {
			Version string
			Time    time.Time
		}{c.version, at.UTC()})
		files, err := c.moduleFiles(m)
		if err != nil {
			return err
		}
		var z bytes.Buffer
		if err := modzip.Create(&z, xmodule.Version{Path: m.path, Version: c.version}, files); err != nil {
			return fmt.Errorf("zip of %s: %w", m.path, err)
		}
		for name, data := range map[string][]byte{
			"list":              []byte(c.version + "\n"),
			c.version + ".info": info,
			c.version + ".mod":  m.gomod,
			c.version + ".zip":  z.Bytes(),
		} {
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
				return err
			}
		}
		fmt.Printf("   %s@%s: %d files, %d KiB\n", m.path, c.version, len(files), z.Len()/1024)
	}
	return nil
}

// moduleFiles lists what a tag of the module would publish: the files git
// tracks or would track (not those it ignores) below the module's
// directory, less those of modules nested in it.
func (c *checker) moduleFiles(m module) ([]modzip.File, error) {
	out, err := output(context.Background(), filepath.Join(c.root, m.dir), nil, "git", "ls-files", "-co", "--exclude-standard", "-z", ".")
	if err != nil {
		return nil, err
	}
	var nested []string
	for _, o := range c.mods {
		if o.dir != m.dir && (m.dir == "." || strings.HasPrefix(o.dir, m.dir+"/")) {
			rel := strings.TrimPrefix(o.dir, m.dir+"/")
			nested = append(nested, rel+"/")
		}
	}
	var files []modzip.File
	for _, rel := range strings.Split(strings.TrimRight(out, "\x00"), "\x00") {
		if rel == "" || slices.ContainsFunc(nested, func(n string) bool { return strings.HasPrefix(rel, n) }) {
			continue
		}
		abs := filepath.Join(c.root, m.dir, filepath.FromSlash(rel))
		fi, err := os.Lstat(abs)
		if os.IsNotExist(err) {
			continue // deleted in the working tree, not yet in git
		}
		if err != nil {
			return nil, err
		}
		files = append(files, diskFile{rel: rel, abs: abs, info: fi})
	}
	return files, nil
}

type diskFile struct {
	rel, abs string
	info     os.FileInfo
}

func (f diskFile) Path() string                { return f.rel }
func (f diskFile) Lstat() (os.FileInfo, error) { return f.info, nil }
func (f diskFile) Open() (io.ReadCloser, error) {
	return os.Open(f.abs)
}

// buildModules builds and vets each published module from its zip, as a
// user who fetched it would: outside the workspace, against the others at
// this version.
func (c *checker) buildModules(ctx context.Context) error {
	for _, m := range c.mods {
		if !m.published {
			continue
		}
		esc, _ := xmodule.EscapePath(m.path)
		dir := filepath.Join(c.scratch, "fetched", strings.ReplaceAll(m.dir, "/", "-"))
		if err := unzip(filepath.Join(c.proxyDir(), filepath.FromSlash(esc), "@v", c.version+".zip"), m.path+"@"+c.version, dir); err != nil {
			return err
		}
		for _, args := range [][]string{{"build", "./..."}, {"vet", "./..."}} {
			if _, err := c.goCmd(ctx, dir, args...); err != nil {
				return err
			}
		}
		fmt.Printf("   %s: go build and go vet ok\n", m.path)
	}
	return nil
}

// unzip writes a module zip's files, whose names all start with prefix/,
// below dir.
func unzip(zipPath, prefix, dir string) error {
	r, err := zip.OpenReader(zipPath)
	if err != nil {
		return err
	}
	defer r.Close()
	for _, f := range r.File {
		rel, ok := strings.CutPrefix(f.Name, prefix+"/")
		if !ok {
			return fmt.Errorf("%s: %s is outside %s", zipPath, f.Name, prefix)
		}
		dst := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		src, err := f.Open()
		if err != nil {
			return err
		}
		b, err := io.ReadAll(src)
		src.Close()
		if err != nil {
			return err
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
