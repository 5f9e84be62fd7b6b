// Command ociimage packs a root file system tarball into a one-layer image
// archive that `ctr images import` loads, so the real test node
// (hack/node.sh) runs images built on this machine from Debian packages: no
// registry is reachable here, and none is needed.
//
//	ociimage -rootfs rootfs.tar -tag localhost/agentsandbox/python:3.11 -out python.tar [-entrypoint /pause] [-cmd sleep,infinity]
package main

import (
	"compress/gzip"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	containerregistry "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func main() {
	rootfs := flag.String("rootfs", "", "tarball of the image's root file system")
	tag := flag.String("tag", "", "the image's name and tag, as pods name it")
	out := flag.String("out", "", "image archive to write")
	entrypoint := flag.String("entrypoint", "", "comma-separated entrypoint (none by default)")
	cmd := flag.String("cmd", "", "comma-separated default command (none by default)")
	flag.Parse()
	if *rootfs == "" || *tag == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "ociimage: -rootfs, -tag and -out are required")
		flag.Usage()
		os.Exit(2)
	}
	if err := pack(*rootfs, *tag, *out, split(*entrypoint), split(*cmd)); err != nil {
		fmt.Fprintf(os.Stderr, "ociimage: %v\n", err)
		os.Exit(1)
	}
}

func split(list string) []string {
	if list == "" {
		return nil
	}
	return strings.Split(list, ",")
}

func pack(rootfs, tag, out string, entrypoint, cmd []string) error {
	ref, err := name.NewTag(tag)
	if err != nil {
		return fmt.Errorf("-tag %q: %w", tag, err)
	}
	// Speed over size: the archive never leaves this machine.
	layer, err := tarball.LayerFromFile(rootfs, tarball.WithCompressionLevel(gzip.BestSpeed))
	if err != nil {
		return fmt.Errorf("-rootfs %s: %w", rootfs, err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	config, err := img.ConfigFile()
	if err != nil {
		return err
	}
	config = config.DeepCopy()
	// containerd imports only images of a platform it can run.
	config.OS, config.Architecture = "linux", runtime.GOARCH
	config.Config = containerregistry.Config{
		Entrypoint: entrypoint,
		Cmd:        cmd,
		Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
	}
	if img, err = mutate.ConfigFile(img, config); err != nil {
		return err
	}
	return tarball.WriteToFile(out, ref, img)
}
