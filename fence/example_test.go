package fence_test

import (
	"errors"
	"fmt"
	"log"

	"github.com/fencegate/fencegate/fence"
)

// A token's text form, as a holder passes it to another process, and
// Parse reading it back.
func ExampleParse() {
	tok, err := fence.NewToken("deploy-slot", "agent-a", 42)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(tok)
	back, err := fence.Parse(tok.String())
	fmt.Println(back == tok, err)
	_, err = fence.Parse("fg1:042:deploy-slot:agent-a")
	fmt.Println(errors.Is(err, fence.ErrInvalidInput))
	// Output:
	// fg1:42:deploy-slot:agent-a
	// true <nil>
	// true
}

// A token of several resources at once, as an outside lock service would
// grant them under one fence: its text form lists every member, Parse reads
// it back, and Covers tells which files a directory member covers.
func ExampleNewSetToken() {
	src, _ := fence.PathResource("src/")
	tok, err := fence.NewSetToken([]string{src, "deploy-slot"}, "agent-a", 7)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(tok)
	back, _ := fence.Parse(tok.String())
	fmt.Println(back == tok, back.Members())
	fmt.Println(tok.Covers("path:src/a/b.go"), tok.Covers("path:srcs/x"))

	_, err = fence.NewSetToken([]string{src, "path:src/a.go"}, "agent-a", 7)
	fmt.Println(errors.Is(err, fence.ErrInvalidInput))

	// Output:
	// fg2:7:agent-a:deploy-slot:path%3Asrc%2F
	// true [deploy-slot path:src/]
	// true false
	// true
}
