package lease

import (
	"flag"
	"os"
	"testing"
)

// parallel is how many of this package's parallel tests run at once when
// -parallel does not say (go test's default is GOMAXPROCS). They spend
// their time waiting on the database and for terms to run out, not on the
// CPU (a run under -race used a fifth of its wall time on two cores), so
// two at a time leave a 2-core machine idle. Each test opens a few pools of
// a few connections; 8 keep the Postgres server well under its 100.
const parallel = "8"

func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		if err := flag.Set("test.parallel", parallel); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}
