//go:build !unix

package main

// openNonblock is 0 where named pipes cannot stand in for a file.
const openNonblock = 0
