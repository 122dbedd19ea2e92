// Command custos serves protected health information to AI assistants as
// MCP resources, where every list and read passes a policy decision and a
// durable audit record before any data leaves. Run `custos --help`.
package main

import "os"

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }
