// Command app runs fxkube's example controller modules. See `app --help`.
package main

import (
	"os"

	"github.com/fxkube/fxkube/app"
	"github.com/fxkube/fxkube/modules/checksum"
	"github.com/fxkube/fxkube/modules/mirror"
	"github.com/fxkube/fxkube/modules/rollout"
)

func main() { os.Exit(app.Main("fxkube", rollout.Module, mirror.Module, checksum.Module)) }
