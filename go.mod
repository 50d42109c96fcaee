module github.com/transmirror/transmirror

go 1.26.8

require (
	github.com/goccy/go-yaml v1.19.2 // indirect
	github.com/miekg/dns v1.1.73 // indirect
	github.com/prometheus/client_golang v1.25.0 // indirect
	golang.org/x/net v0.59.0 // indirect
	golang.org/x/sync v0.25.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)
