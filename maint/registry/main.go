// The registry server: distribution v3 with the filesystem driver only (the
// upstream cmd/registry also links the S3, Azure and GCS drivers).
package main

import (
	"os"

	"github.com/distribution/distribution/v3/registry"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/filesystem"
)

func main() {
	if err := registry.RootCmd.Execute(); err != nil {
		os.Exit(1)
	}
}
