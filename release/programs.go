package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// block is one fenced code block of a guide.
type block struct {
	file, lang, text string
	line             int
}

var fence = regexp.MustCompile("(?m)^```([a-z]*)\n")

// guideBlocks reads the fenced code blocks of README.md and docs/*.md.
func (c *checker) guideBlocks() ([]block, error) {
	docs, err := filepath.Glob(filepath.Join(c.root, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	var blocks []block
	for _, f := range append([]string{filepath.Join(c.root, "README.md")}, docs...) {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		s := string(b)
		rel, _ := filepath.Rel(c.root, f)
		for pos := 0; ; {
			loc := fence.FindStringSubmatchIndex(s[pos:])
			if loc == nil {
				break
			}
			start := pos + loc[1]
			end := strings.Index(s[start:], "\n```")
			if end < 0 {
				return nil, fmt.Errorf("%s: a code block is never closed", rel)
			}
			blocks = append(blocks, block{
				file: rel, lang: s[pos+loc[2] : pos+loc[3]], text: s[start : start+end+1],
				line: strings.Count(s[:start], "\n") + 1,
			})
			pos = start + end + 4
		}
	}
	return blocks, nil
}

var packageMain = regexp.MustCompile(`(?m)^package main$`)

// database names what a program needs to run, from what it imports.
func database(src string) string {
	switch {
	case strings.Contains(src, `"`+libraryPath+`/etcdfence`):
		return "etcd"
	case strings.Contains(src, `/sqlstore/mysql"`):
		return "mysql"
	case strings.Contains(src, `/sqlstore/pgxv5`), strings.Contains(src, `/sqlstore/pgsql"`),
		strings.Contains(src, `"github.com/jackc/pgx/v5`):
		return "postgres"
	}
	return "sqlite"
}

// runPrograms builds every complete program (a block with "package main")
// of the guides in one consumer module that requires the released modules,
// then runs each against the database it imports.
func (c *checker) runPrograms(ctx context.Context) error {
	blocks, err := c.guideBlocks()
	if err != nil {
		return err
	}
	consumer := filepath.Join(c.scratch, "consumer")
	if err := os.MkdirAll(consumer, 0o755); err != nil {
		return err
	}
	if _, err := c.goCmd(ctx, consumer, "mod", "init", "example.com/consumer"); err != nil {
		return err
	}
	gets := []string{"get", libraryPath + "@" + c.version}
	type program struct {
		block
		dir, db string
	}
	var progs []program
	for _, b := range blocks {
		if b.lang != "go" || !packageMain.MatchString(b.text) {
			continue
		}
		p := program{block: b, dir: fmt.Sprintf("prog%02d", len(progs)+1), db: database(b.text)}
		for _, m := range c.mods {
			if m.published && m.path != libraryPath && strings.Contains(b.text, `"`+m.path) &&
				!slices.Contains(gets, m.path+"@"+c.version) {
				gets = append(gets, m.path+"@"+c.version)
			}
		}
		if err := os.MkdirAll(filepath.Join(consumer, p.dir), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(consumer, p.dir, "main.go"), []byte(b.text), 0o644); err != nil {
			return err
		}
		progs = append(progs, p)
	}
	if len(progs) == 0 {
		return fmt.Errorf("no Go program (a ```go block with `package main`) in README.md or docs/")
	}
	if _, err := c.goCmd(ctx, consumer, gets...); err != nil {
		return err
	}
	if _, err := c.goCmd(ctx, consumer, "mod", "tidy"); err != nil {
		return err
	}
	urls := map[string]string{
		"postgres": os.Getenv("FENCEGATE_TEST_DATABASE_URL"),
		"mysql":    os.Getenv("FENCEGATE_TEST_MYSQL_URL"),
	}
	require := map[string]bool{
		"postgres": os.Getenv("FENCEGATE_REQUIRE_POSTGRES") == "true",
		"mysql":    os.Getenv("FENCEGATE_REQUIRE_MYSQL") == "true",
	}
	for _, p := range progs {
		where := fmt.Sprintf("%s:%d", p.file, p.line)
		exe := filepath.Join(c.scratch, "bin", p.dir)
		if _, err := c.goCmd(ctx, consumer, "build", "-o", exe, "./"+p.dir); err != nil {
			return fmt.Errorf("the program at %s does not build: %w", where, err)
		}
		runs := 1
		env := c.env
		switch p.db {
		case "etcd":
			fmt.Printf("   %s (%s): built; it needs an etcd cluster, so it is not run here\n", where, p.db)
			continue
		case "sqlite":
			runs = 2 // a second run must not trip over the first one's database
		default:
			if urls[p.db] == "" {
				if require[p.db] {
					return fmt.Errorf("the program at %s needs %s and its URL is not set", where, p.db)
				}
				fmt.Printf("   %s (%s): built; SKIPPED running, no database URL in the environment\n", where, p.db)
				continue
			}
			url, drop, err := c.freshDatabase(ctx, p.db, urls[p.db], p.dir)
			if err != nil {
				return err
			}
			defer drop()
			env = append(slices.Clip(env), "DATABASE_URL="+url)
		}
		dir := filepath.Join(c.scratch, "run-"+p.dir)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		for i := range runs {
			runCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			_, err := output(runCtx, dir, env, exe)
			cancel()
			if err != nil {
				return fmt.Errorf("the program at %s failed on run %d: %w", where, i+1, err)
			}
		}
		fmt.Printf("   %s (%s): built, ran %d×\n", where, p.db, runs)
	}
	return nil
}

// gooseBlock is a shell block that runs the goose command.
var gooseBlock = regexp.MustCompile(`(?m)^goose `)

// placeholder DSNs of the guides, and the database each stands for.
var placeholders = map[string]string{
	`"postgres://user:password@host:5432/app"`: "postgres",
	`"user:password@tcp(host:3306)/app"`:       "mysql",
}

// runGooseLines runs each shell block of the guides that calls goose, in
// the consumer module, so that its `go list -m` finds the released module's
// migrations in the module cache: twice, since a second run must find
// nothing to do. The placeholder DSNs become fresh databases on the test
// servers; goose itself is installed at the version the library requires,
// without the drivers of databases fencegate does not support, so the
// block's own `go install` of it is left out.
func (c *checker) runGooseLines(ctx context.Context) error {
	blocks, err := c.guideBlocks()
	if err != nil {
		return err
	}
	var goose string
	for _, m := range c.mods {
		if m.path == libraryPath {
			for _, r := range m.file.Require {
				if r.Mod.Path == "github.com/pressly/goose/v3" {
					goose = r.Mod.Version
				}
			}
		}
	}
	consumer := filepath.Join(c.scratch, "consumer")
	ran := 0
	for i, b := range blocks {
		if (b.lang != "sh" && b.lang != "bash") || !gooseBlock.MatchString(b.text) {
			continue
		}
		if ran == 0 {
			if _, err := c.goCmd(ctx, consumer, "install", "-tags", "no_clickhouse no_libsql no_mssql no_vertica no_ydb",
				"github.com/pressly/goose/v3/cmd/goose@"+goose); err != nil {
				return err
			}
		}
		var script []string
		for _, l := range strings.Split(b.text, "\n") {
			if !strings.HasPrefix(l, "go install github.com/pressly/goose/") {
				script = append(script, l)
			}
		}
		text := strings.Join(script, "\n")
		for ph, db := range placeholders {
			if !strings.Contains(text, ph) {
				continue
			}
			url := os.Getenv(map[string]string{"postgres": "FENCEGATE_TEST_DATABASE_URL", "mysql": "FENCEGATE_TEST_MYSQL_URL"}[db])
			if url == "" {
				return fmt.Errorf("%s:%d runs goose on %s: set its URL (FENCEGATE_TEST_DATABASE_URL, FENCEGATE_TEST_MYSQL_URL)", b.file, b.line, db)
			}
			dsn, drop, err := c.freshDatabase(ctx, db, url, fmt.Sprintf("goose%d", i))
			if err != nil {
				return err
			}
			defer drop()
			if db == "mysql" {
				if dsn, err = mysqlDSN(dsn); err != nil {
					return err
				}
			}
			text = strings.ReplaceAll(text, ph, "'"+dsn+"'")
		}
		for run := 1; run <= 2; run++ {
			if _, err := output(ctx, consumer, c.env, "bash", "-euo", "pipefail", "-c", text); err != nil {
				return fmt.Errorf("the goose block at %s:%d, run %d: %w", b.file, b.line, run, err)
			}
		}
		fmt.Printf("   %s:%d: goose block ran twice\n", b.file, b.line)
		ran++
	}
	if ran == 0 {
		return fmt.Errorf("no shell block of the guides runs goose")
	}
	return nil
}
