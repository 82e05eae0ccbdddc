// Command release checks that this tree, tagged at a version, installs and
// works for someone who has never seen the repository.
//
// It builds a file-based module proxy from the working tree (every file git
// tracks or would track) at the version, as module zips in the format the go
// command reads, then, with GOWORK=off and an empty GOPATH, module cache and
// build cache, that proxy first and the usual one after it for dependencies:
//
//   - installs the command with go install …/cmd/fencegate@VERSION, checks
//     that --version prints VERSION and runs the demo;
//   - builds and vets every published module as a user fetches it;
//   - makes a consumer module that requires the library at VERSION, builds
//     every Go program of README.md and docs/*.md and runs it (SQLite ones
//     twice in a row, Postgres ones against FENCEGATE_TEST_DATABASE_URL,
//     MySQL ones against FENCEGATE_TEST_MYSQL_URL);
//   - runs the goose command lines of the guides against the migrations/
//     of the module in the module cache;
//   - checks that the library module requires only what the README says.
//
// Run it from anywhere in the repository:
//
//	go run ./release                 # the version of CHANGELOG.md's newest "## vX.Y.Z"
//	go run ./release -version v0.2.0
//
// docs/RELEASING.md gives the release procedure this check stands for.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

func main() {
	version := flag.String("version", "", "the version to check (default: the newest `## vX.Y.Z` heading of CHANGELOG.md)")
	keep := flag.Bool("keep", false, "keep the scratch directory and say where it is")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *version, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "release check FAILED:", err)
		os.Exit(1)
	}
	fmt.Println("release check passed")
}

func run(ctx context.Context, version string, keep bool) error {
	root, err := output(ctx, "", nil, "git", "rev-parse", "--show-toplevel")
	if err != nil {
		return fmt.Errorf("not in a git checkout: %w", err)
	}
	root = strings.TrimSpace(root)
	if version == "" {
		if version, err = changelogVersion(filepath.Join(root, "CHANGELOG.md")); err != nil {
			return err
		}
	}
	mods, err := readModules(root)
	if err != nil {
		return err
	}
	if err := checkRequirements(mods, version); err != nil {
		return err
	}
	if err := checkLibraryDeps(mods); err != nil {
		return err
	}

	scratch, err := os.MkdirTemp("", "fencegate-release-")
	if err != nil {
		return err
	}
	c := &checker{root: root, version: version, scratch: scratch, mods: mods}
	defer c.cleanup(keep)

	fmt.Printf("== %s: module proxy from the working tree at %s\n", version, c.proxyDir())
	if err := c.buildProxy(); err != nil {
		return err
	}
	if c.env, err = c.environment(ctx); err != nil {
		return err
	}
	for _, s := range []struct {
		name string
		do   func(context.Context) error
	}{
		{"go install the command", c.installCommand},
		{"build and vet each published module as fetched", c.buildModules},
		{"build and run the guides' Go programs in a consumer module", c.runPrograms},
		{"run the guides' goose command lines", c.runGooseLines},
	} {
		start := time.Now()
		fmt.Printf("== %s\n", s.name)
		if err := s.do(ctx); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		fmt.Printf("   ok (%s)\n", time.Since(start).Round(time.Second))
	}
	return nil
}

var versionHeading = regexp.MustCompile(`(?m)^## (v\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?)\b`)

// changelogVersion is the newest version CHANGELOG.md announces: the
// release notes and the tag are written together.
func changelogVersion(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	m := versionHeading.FindSubmatch(b)
	if m == nil {
		return "", errors.New("CHANGELOG.md has no `## vX.Y.Z` heading: say -version")
	}
	return string(m[1]), nil
}

// checker holds one run's scratch space and the environment every go
// command of the run gets.
type checker struct {
	root, version, scratch string
	mods                   []module
	env                    []string
}

func (c *checker) proxyDir() string { return filepath.Join(c.scratch, "proxy") }

// environment is a stranger's: no workspace, nothing cached, our modules
// from the file proxy (not looked up in a checksum database, as they were
// never published) and everything else from the usual proxy.
func (c *checker) environment(ctx context.Context) ([]string, error) {
	upstream, err := output(ctx, "", nil, "go", "env", "GOPROXY")
	if err != nil {
		return nil, err
	}
	drop := map[string]bool{}
	for _, k := range []string{"GOWORK", "GOFLAGS", "GOPATH", "GOMODCACHE", "GOCACHE", "GOBIN", "GOPROXY",
		"GONOSUMDB", "GONOSUMCHECK", "GOPRIVATE", "GONOPROXY", "GOINSECURE", "GOTOOLCHAIN", "GOENV"} {
		drop[k] = true
	}
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); !drop[k] {
			env = append(env, kv)
		}
	}
	gopath := filepath.Join(c.scratch, "gopath")
	return append(env,
		"GOENV=off",
		"GOWORK=off",
		"GOFLAGS=-mod=mod",
		"GOTOOLCHAIN=local",
		"GOPATH="+gopath,
		"GOMODCACHE="+filepath.Join(gopath, "pkg", "mod"),
		"GOCACHE="+filepath.Join(c.scratch, "cache"),
		"GOBIN="+c.bin(),
		"GOPROXY=file://"+filepath.ToSlash(c.proxyDir())+","+strings.TrimSpace(upstream),
		"GONOSUMDB="+libraryPath,
		"PATH="+c.bin()+string(os.PathListSeparator)+os.Getenv("PATH"),
	), nil
}

func (c *checker) bin() string { return filepath.Join(c.scratch, "bin") }

// cleanup removes the scratch space; the module cache is read-only, so the
// go command that made it unmakes it.
func (c *checker) cleanup(keep bool) {
	if keep {
		fmt.Println("scratch kept:", c.scratch)
		return
	}
	if c.env != nil {
		cmd := exec.Command("go", "clean", "-modcache")
		cmd.Env = c.env
		_ = cmd.Run()
	}
	_ = os.RemoveAll(c.scratch)
}

// installCommand is the README's install line at this version.
func (c *checker) installCommand(ctx context.Context) error {
	if _, err := c.goCmd(ctx, c.scratch, "install", libraryPath+"/cmd/fencegate@"+c.version); err != nil {
		return err
	}
	exe := filepath.Join(c.bin(), "fencegate")
	got, err := output(ctx, c.scratch, c.env, exe, "--version")
	if err != nil {
		return err
	}
	if !strings.Contains(got, c.version) {
		return fmt.Errorf("fencegate --version printed %q, not %s", strings.TrimSpace(got), c.version)
	}
	fmt.Printf("   fencegate --version: %s\n", strings.TrimSpace(got))
	demoDir := filepath.Join(c.scratch, "demo")
	if err := os.MkdirAll(demoDir, 0o755); err != nil {
		return err
	}
	if _, err := output(ctx, demoDir, c.env, exe, "demo"); err != nil {
		return fmt.Errorf("fencegate demo: %w", err)
	}
	fmt.Println("   fencegate demo: ok")
	return nil
}

// goCmd runs the go command in the stranger's environment.
func (c *checker) goCmd(ctx context.Context, dir string, args ...string) (string, error) {
	return output(ctx, dir, c.env, "go", args...)
}

// output runs a command and returns its standard output; a failure carries
// the command line and what it printed.
func output(ctx context.Context, dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = env
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s (in %s): %w\n%s%s", name, strings.Join(args, " "), dir, err,
			tail(stdout.String()), tail(stderr.String()))
	}
	return stdout.String(), nil
}

// tail keeps the end of a long output, where the go command says what failed.
func tail(s string) string {
	const max = 4000
	if len(s) > max {
		s = "…" + s[len(s)-max:]
	}
	return s
}
