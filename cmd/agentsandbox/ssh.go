package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/version"
	"github.com/agentsandbox/terraform-provider-agentsandbox/sshproxy"
)

// defaultSSHSuffix is the host name ending that marks a sandbox in the
// ssh-config block: `ssh alice-scratch.sandbox`.
const defaultSSHSuffix = ".sandbox"

// newSSHProxyCommand is `agentsandbox ssh-proxy NAME`: an SSH server on
// stdin and stdout for OpenSSH's ProxyCommand, bridging to the sandbox with
// the caller's Kubernetes credentials.
func newSSHProxyCommand() *cobra.Command {
	var conn clientFlags
	var suffix, dir string
	cmd := &cobra.Command{
		Use:   "ssh-proxy NAME",
		Short: "Speak SSH on stdin/stdout for OpenSSH's ProxyCommand, bridged to your sandbox (see ssh-config)",
		Long: `Serves one SSH connection on standard input and output, as OpenSSH's
ProxyCommand, and carries it to sandbox NAME through the Kubernetes API with
your kubeconfig's identity: a shell or command becomes an exec (with a
terminal, its size and the exit status), scp and sftp are served on top of
the workspace's file operations, and ssh -L forwards to the sandbox's own
ports. No sshd runs in the sandbox and no key is stored in the cluster.
NAME may end in --suffix, which is removed. Run ssh-config to set it up.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := conn.client()
			if err != nil {
				return err
			}
			key, err := sshproxy.HostKey(dir)
			if err != nil {
				return err
			}
			server := &sshproxy.Server{Client: c, Sandbox: strings.TrimSuffix(args[0], suffix), HostKey: key, Version: version.Version, Log: cmd.ErrOrStderr()}
			return server.Serve(cmd.Context(), sshproxy.StdioConn{Reader: cmd.InOrStdin(), WriteCloser: os.Stdout})
		},
	}
	conn.register(cmd)
	cmd.Flags().StringVar(&suffix, "suffix", defaultSSHSuffix, "host name ending removed from NAME")
	registerKeyDir(cmd, &dir)
	return cmd
}

// newSSHConfigCommand is `agentsandbox ssh-config`: the Host block that
// makes plain ssh, scp and sftp reach sandboxes through ssh-proxy.
func newSSHConfigCommand() *cobra.Command {
	var conn clientFlags
	var suffix, dir string
	cmd := &cobra.Command{
		Use:   "ssh-config",
		Short: "Print the ~/.ssh/config block that makes `ssh NAME.sandbox` reach your sandbox",
		Long: `Prints a Host block for ~/.ssh/config (append it, or save it and Include it):
	agentsandbox ssh-config >> ~/.ssh/config
	ssh alice-scratch.sandbox
The block runs this binary's ssh-proxy as ProxyCommand, with the connection
flags given here (--kubeconfig, --context, --as). It also makes the proxy's
host key, one per user under the configuration directory, and a known_hosts
file naming it, so that the host key is checked strictly from the first
connection.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !strings.HasPrefix(suffix, ".") || len(suffix) < 2 || strings.ContainsAny(suffix, " \t*?!%\"'") {
				return fmt.Errorf("--suffix %q: give a host name ending that starts with a dot, such as .sandbox", suffix)
			}
			if _, err := sshproxy.HostKey(dir); err != nil {
				return err
			}
			self, err := os.Executable()
			if err != nil {
				return err
			}
			proxy := []string{shellQuote(self), "ssh-proxy"}
			for _, flag := range conn.args() {
				proxy = append(proxy, shellQuote(flag))
			}
			proxy = append(proxy, "--suffix", shellQuote(suffix), "--key-dir", shellQuote(dir), "%n")
			_, err = fmt.Fprintf(cmd.OutOrStdout(), `# agentsandbox: sandboxes over SSH (ssh NAME%[1]s, scp FILE NAME%[1]s:, sftp NAME%[1]s).
# Printed by "agentsandbox ssh-config"; the proxy acts with your Kubernetes identity.
Host *%[1]s
    ProxyCommand %[2]s
    HostKeyAlias %[3]s
    UserKnownHostsFile "%[4]s"
    StrictHostKeyChecking yes
    SendEnv LANG LC_*
    ForwardAgent no
    ForwardX11 no
`, suffix, strings.Join(proxy, " "), sshproxy.HostKeyAlias, sshproxy.KnownHostsPath(dir))
			return err
		},
	}
	conn.register(cmd)
	cmd.Flags().StringVar(&suffix, "suffix", defaultSSHSuffix, "host name ending that marks a sandbox")
	registerKeyDir(cmd, &dir)
	return cmd
}

// registerKeyDir adds --key-dir, defaulting to the user's configuration
// directory.
func registerKeyDir(cmd *cobra.Command, dir *string) {
	def, err := sshproxy.DefaultDir()
	if err != nil {
		def = ""
	}
	cmd.Flags().StringVar(dir, "key-dir", def, "directory of the proxy's host key and its known_hosts file")
}

// shellQuote quotes s for the shell that runs a ProxyCommand, leaving plain
// words as they are.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:@,+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
