// Command fleet is an example binary of controllers across member
// clusters: the fleet module, which copies labelled ConfigMaps of the
// app's own cluster into every member. See docs/guides/run-across-clusters.md.
package main

import (
	"os"

	"github.com/fxkube/fxkube/app"
	"github.com/fxkube/fxkube/modules/fleet"
)

func main() { os.Exit(app.Main("fleet", fleet.Module)) }
