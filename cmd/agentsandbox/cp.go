package main

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentsandbox/terraform-provider-agentsandbox/sandboxclient"
)

func newCpCommand() *cobra.Command {
	var conn clientFlags
	var opts sandboxclient.FileOptions
	var recursive bool
	cmd := &cobra.Command{
		Use:   "cp [-r] SRC DST",
		Short: "Copy files into or out of your sandbox's workspace",
		Long: `Copies a file, or with -r a directory, between this machine and a
sandbox's workspace; one of SRC and DST is NAME:PATH, PATH relative to the
workspace (or absolute inside it). Paths that leave the workspace, also
through symbolic links, are refused. A local DST of - writes a file to
stdout; a DST that is a directory (or, in the sandbox, ends in /) gets the
source's name. A file is replaced only once it has arrived whole; a
directory copied in must not exist yet and appears only once complete.
Copying out, links that would point outside DST are skipped (and listed).

  agentsandbox cp ./data.csv my-sandbox:input/data.csv
  agentsandbox cp my-sandbox:out/report.json .
  agentsandbox cp -r ./project my-sandbox:project`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			srcName, srcPath, srcRemote := splitRemote(args[0])
			dstName, dstPath, dstRemote := splitRemote(args[1])
			if srcRemote == dstRemote {
				return errors.New("exactly one of SRC and DST must be NAME:PATH")
			}
			c, err := conn.client()
			if err != nil {
				return err
			}
			switch {
			case dstRemote && recursive:
				if dstPath == "" || strings.HasSuffix(dstPath, "/") {
					dstPath = path.Join(dstPath, filepath.Base(filepath.Clean(srcPath)))
				}
				return c.CopyDirTo(cmd.Context(), dstName, srcPath, dstPath, opts)
			case dstRemote:
				return upload(cmd, c, srcPath, dstName, dstPath, opts)
			case recursive:
				return downloadDir(cmd, c, srcName, srcPath, dstPath, opts)
			}
			return download(cmd, c, srcName, srcPath, dstPath, opts)
		},
	}
	cmd.Flags().BoolVarP(&recursive, "recursive", "r", false, "copy a directory")
	cmd.Flags().Int64Var(&opts.Limit, "limit", sandboxclient.DefaultFileLimit, "largest file copied, in bytes")
	conn.register(cmd)
	return cmd
}

// splitRemote tells NAME:PATH from a local path (which may contain a colon
// after a slash, as in ./a:b).
func splitRemote(arg string) (name, p string, remote bool) {
	name, p, found := strings.Cut(arg, ":")
	if !found || name == "" || strings.Contains(name, "/") {
		return "", arg, false
	}
	return name, p, true
}

func upload(cmd *cobra.Command, c *sandboxclient.Client, local, name, remote string, opts sandboxclient.FileOptions) error {
	f, err := os.Open(local)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	if info.IsDir() {
		return fmt.Errorf("%s is a directory (copy it with -r)", local)
	}
	if !info.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", local)
	}
	if remote == "" || strings.HasSuffix(remote, "/") {
		remote = path.Join(remote, filepath.Base(local))
	}
	opts.Mode = info.Mode().Perm()
	return c.WriteFile(cmd.Context(), name, remote, f, info.Size(), opts)
}

// download writes to a temporary file beside the destination and renames
// it into place only once the whole file arrived.
func download(cmd *cobra.Command, c *sandboxclient.Client, name, remote, local string, opts sandboxclient.FileOptions) error {
	if local == "-" {
		_, err := c.ReadFile(cmd.Context(), name, remote, cmd.OutOrStdout(), opts)
		return err
	}
	if info, err := os.Stat(local); err == nil && info.IsDir() {
		local = filepath.Join(local, path.Base(remote))
	}
	tmp, err := os.CreateTemp(filepath.Dir(local), ".agentsandbox-cp-*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	_, err = c.ReadFile(cmd.Context(), name, remote, tmp, opts)
	if closeErr := tmp.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp.Name(), local)
}

// downloadDir copies a workspace directory into local, or into a new
// directory of the source's name when local is an existing directory, as
// cp -r does.
func downloadDir(cmd *cobra.Command, c *sandboxclient.Client, name, remote, local string, opts sandboxclient.FileOptions) error {
	if info, err := os.Stat(local); err == nil && info.IsDir() {
		if base := path.Base(path.Clean("/" + remote)); base != "/" {
			local = filepath.Join(local, base)
		}
	}
	skipped, err := c.CopyDirFrom(cmd.Context(), name, remote, local, opts)
	for _, s := range skipped {
		_, _ = fmt.Fprintf(cmd.ErrOrStderr(), "skipped %s (a link out of the copy, a hard link or a special file)\n", s)
	}
	return err
}
