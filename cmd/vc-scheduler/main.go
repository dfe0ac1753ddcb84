// Command vc-scheduler is Volcano v1.10.0's scheduler with every built-in
// action and plugin, and this project's deviceshare plugin registered under
// the name "deviceshare" in place of the built-in one.
package main

import (
	"os"

	"github.com/vgpushare/vshare/cmd/vc-scheduler/app"
)

func main() {
	os.Exit(app.Main(os.Args[1:]))
}
