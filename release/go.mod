module github.com/fencegate/fencegate/release

go 1.26.0

require golang.org/x/mod v0.43.0

require golang.org/x/tools v0.53.0 // indirect
