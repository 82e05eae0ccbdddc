//go:build !unix

package main

func unixHelper(string, string) (int, bool) { return 0, false }
