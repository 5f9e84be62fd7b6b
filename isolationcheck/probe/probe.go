// Package probe is what the isolation check runs inside a sandbox: small
// attacks whose results, printed as JSON, say what the sandbox's code can
// see and reach. It is linked into cmd/sandbox-gate, a static binary with
// nothing but the standard library, x/sys and x/net's DNS messages, so
// that it runs in any template's image and costs a few megabytes to copy
// in.
//
// Each probe only observes; the judging (what the template allows, what
// is an escape) happens outside, in package isolationcheck.
package probe

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Command is the argument that selects the probes in cmd/sandbox-gate.
const Command = "probe"

// Main runs the probe args names and writes its JSON to stdout; it
// returns the process's exit code.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: probe facts|connect|scan|listen|processes|fill|window|dns|icmp …")
		return 2
	}
	name, args := args[0], args[1:]
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	timeout := fs.Duration("timeout", time.Second, "how long one connection attempt may take")
	var result any
	run := func() error { return fmt.Errorf("unknown probe %q", name) }
	switch name {
	case "facts":
		workspace := fs.String("workspace", "", "the workspace's mount path")
		run = func() error { result = Gather(*workspace); return nil }
	case "connect":
		run = func() error { result = Connect(fs.Args(), *timeout); return nil }
	case "scan":
		run = func() error {
			if fs.NArg() != 3 {
				return errors.New("scan HOST FIRST LAST")
			}
			first, err1 := strconv.Atoi(fs.Arg(1))
			last, err2 := strconv.Atoi(fs.Arg(2))
			if err := errors.Join(err1, err2); err != nil {
				return err
			}
			result = Scan(fs.Arg(0), first, last, *timeout)
			return nil
		}
	case "listen":
		run = func() error {
			if fs.NArg() != 1 {
				return errors.New("listen PORT")
			}
			r, err := Listen(fs.Arg(0), stdin, stdout)
			result = r
			return err
		}
	case "processes":
		run = func() error {
			limit, err := strconv.Atoi(fs.Arg(0))
			if err != nil {
				return fmt.Errorf("processes LIMIT: %w", err)
			}
			result = Processes(limit)
			return nil
		}
	case "fill":
		run = func() error {
			size, err := strconv.ParseInt(fs.Arg(1), 10, 64)
			if err != nil {
				return fmt.Errorf("fill DIR BYTES: %w", err)
			}
			result = Fill(fs.Arg(0), size)
			return nil
		}
	case "dns":
		run = func() error { result = DNS(fs.Args(), *timeout); return nil }
	case "icmp":
		run = func() error { result = ICMP(fs.Args(), *timeout); return nil }
	case "window":
		run = func() error {
			length, err := time.ParseDuration(fs.Arg(1))
			if err != nil {
				return fmt.Errorf("window ADDRESS DURATION: %w", err)
			}
			result = Window(fs.Arg(0), length)
			return nil
		}
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := run(); err != nil {
		fmt.Fprintf(stderr, "probe %s: %v\n", name, err)
		return 2
	}
	if result != nil {
		if err := json.NewEncoder(stdout).Encode(result); err != nil {
			fmt.Fprintf(stderr, "probe %s: %v\n", name, err)
			return 1
		}
	}
	return 0
}

// nodeProgramNames are processes of a node that a sandbox with a PID
// namespace of its own never sees.
var nodeProgramNames = []string{"kubelet", "containerd", "dockerd", "crio", "systemd", "sshd", "kube-proxy", "runsc"}

// Gather reads the facts.
func Gather(workspace string) Facts {
	f := Facts{UID: os.Getuid(), GID: os.Getgid(), IPv4: []string{}, IPv6: []string{}}
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		f.Problems = append(f.Problems, err.Error())
	}
	for _, line := range strings.Split(string(status), "\n") {
		key, value, _ := strings.Cut(line, ":")
		value = strings.TrimSpace(value)
		switch key {
		case "CapEff":
			f.CapEff = value
		case "CapBnd":
			f.CapBnd = value
		case "NoNewPrivs":
			f.NoNewPrivs = value
		case "Seccomp":
			f.Seccomp = value
		}
	}
	_, err = os.Stat("/var/run/secrets/kubernetes.io/serviceaccount")
	f.ServiceAccountToken = err == nil
	f.PID1 = cmdline("1")
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		f.Processes++
		line := cmdline(e.Name())
		for _, name := range nodeProgramNames {
			if program := strings.Fields(line + " x")[0]; strings.HasSuffix(program, "/"+name) || program == name {
				f.NodeProcesses = append(f.NodeProcesses, line)
			}
		}
	}
	version, _ := os.ReadFile("/proc/version")
	f.Kernel = strings.TrimSpace(string(version))
	f.KernelLog = kernelLog()
	if file, err := os.Create("/.agentsandbox-probe"); err == nil {
		file.Close()
		os.Remove(file.Name())
		f.RootWritable = true
	}
	f.IPv4, f.IPv6, f.Gateway, err = addresses()
	if err != nil {
		f.Problems = append(f.Problems, err.Error())
	}
	if host := os.Getenv("KUBERNETES_SERVICE_HOST"); host != "" {
		f.Service = joinHostPort(host, os.Getenv("KUBERNETES_SERVICE_PORT"))
	}
	if workspace != "" {
		space, err := statSpace(workspace)
		if err != nil {
			f.Problems = append(f.Problems, err.Error())
		} else {
			f.Workspace = &space
		}
	}
	return f
}

func cmdline(pid string) string {
	raw, _ := os.ReadFile("/proc/" + pid + "/cmdline")
	return strings.TrimSpace(strings.ReplaceAll(string(raw), "\x00", " "))
}

func joinHostPort(host, port string) string {
	if port == "" {
		port = "443"
	}
	return net.JoinHostPort(host, port)
}

// addresses lists the non-loopback interfaces' addresses and the default
// IPv4 gateway (from /proc/net/route, which gVisor has too).
func addresses() (ipv4, ipv6 []string, gateway string, err error) {
	ipv4, ipv6 = []string{}, []string{}
	ifaces, err := net.Interfaces()
	if err != nil {
		return ipv4, ipv6, "", err
	}
	for _, iface := range ifaces {
		if iface.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, err := iface.Addrs()
		if err != nil {
			return ipv4, ipv6, "", err
		}
		for _, a := range addrs {
			prefix, err := netip.ParsePrefix(a.String())
			if err != nil {
				continue
			}
			ip := prefix.Addr()
			switch {
			case ip.Is4():
				ipv4 = append(ipv4, ip.String())
			case ip.IsLinkLocalUnicast():
				ipv6 = append(ipv6, ip.WithZone(iface.Name).String())
			default:
				ipv6 = append(ipv6, ip.String())
			}
		}
	}
	routes, err := os.ReadFile("/proc/net/route")
	if err != nil {
		return ipv4, ipv6, "", nil
	}
	for _, line := range strings.Split(string(routes), "\n")[1:] {
		fields := strings.Fields(line)
		if len(fields) < 3 || fields[1] != "00000000" {
			continue
		}
		raw, err := strconv.ParseUint(fields[2], 16, 32)
		if err != nil {
			continue
		}
		// Little-endian in the file.
		gateway = netip.AddrFrom4([4]byte{byte(raw), byte(raw >> 8), byte(raw >> 16), byte(raw >> 24)}).String()
	}
	return ipv4, ipv6, gateway, nil
}

// Connect tries each address once, all at the same time.
func Connect(addresses []string, timeout time.Duration) []Reach {
	out := make([]Reach, len(addresses))
	var wg sync.WaitGroup
	for i, address := range addresses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = dial(address, timeout)
		}()
	}
	wg.Wait()
	return out
}

// dial tries address once and names the outcome.
func dial(address string, timeout time.Duration) Reach {
	conn, err := net.DialTimeout("tcp", address, timeout)
	if err == nil {
		conn.Close()
		return Reach{Address: address, Result: Open}
	}
	result, detail := outcome(err)
	return Reach{Address: address, Result: result, Detail: detail}
}

// outcome names what a network error says of the destination: refused,
// timeout, unreachable (with the error), or error.
func outcome(err error) (result, detail string) {
	var netErr net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return Refused, ""
	case errors.As(err, &netErr) && netErr.Timeout():
		return Timeout, ""
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.EADDRNOTAVAIL):
		return Unreachable, err.Error()
	}
	return Failed, err.Error()
}

// scanParallel is how many ports a scan tries at once.
const scanParallel = 256

// Scan tries every port from first to last on host.
func Scan(host string, first, last int, timeout time.Duration) ScanResult {
	out := ScanResult{Host: host, Open: []int{}, Results: map[string]int{}}
	ports := make(chan int)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range scanParallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for port := range ports {
				r := dial(net.JoinHostPort(host, strconv.Itoa(port)), timeout)
				mu.Lock()
				out.Tried++
				out.Results[r.Result]++
				if r.Result == Open {
					out.Open = append(out.Open, port)
				}
				mu.Unlock()
			}
		}()
	}
	for port := first; port <= last; port++ {
		ports <- port
	}
	close(ports)
	wg.Wait()
	slices.Sort(out.Open)
	return out
}

// listenDrain is how long Listen goes on accepting once stdin ended: a
// connection whose handshake the kernel completed before then waits in the
// listener's backlog until accepted, and closing the listener would drop
// it unreported.
const listenDrain = 100 * time.Millisecond

// Listen accepts connections on port, on every address of the sandbox,
// until stdin ends, and returns who connected.
func Listen(port string, stdin io.Reader, stdout io.Writer) (ListenResult, error) {
	out := ListenResult{Accepted: []string{}}
	ln, err := net.Listen("tcp", ":"+port)
	if err != nil {
		return out, err
	}
	defer ln.Close()
	accepting := make(chan struct{})
	go func() {
		defer close(accepting)
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			out.Accepted = append(out.Accepted, conn.RemoteAddr().String())
			conn.Close()
		}
	}()
	fmt.Fprintln(stdout, Listening)
	_, _ = io.Copy(io.Discard, stdin)
	if ln.(*net.TCPListener).SetDeadline(time.Now().Add(listenDrain)) != nil {
		ln.Close() // no drain, but no accept left running either
	}
	<-accepting
	return out, nil
}

// Processes forks children that sleep until killed, one after the other,
// until limit of them run or the kernel refuses one, then kills them all:
// a fork bomb that stops itself. The children are forks of this process
// that run no Go code (see fork), so each costs the node one PID and
// little memory, as a shell's fork bomb would.
func Processes(limit int) ProcessesResult {
	out := ProcessesResult{}
	children := make([]int, 0, limit)
	defer func() {
		for _, pid := range children {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		for _, pid := range children {
			var status syscall.WaitStatus
			_, _ = syscall.Wait4(pid, &status, 0, nil)
		}
	}()
	for len(children) < limit {
		pid, err := fork()
		if err != nil {
			out.Refused = errnoName(err)
			break
		}
		children = append(children, pid)
	}
	out.Started = len(children)
	return out
}

// Fill asks the file system under dir for size bytes in one file, then
// removes it.
func Fill(dir string, size int64) FillResult {
	out := FillResult{Requested: size, How: "fallocate"}
	path := filepath.Join(dir, ".agentsandbox-fill")
	file, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		out.Refused = err.Error()
		return out
	}
	defer os.Remove(path)
	defer file.Close()
	err = allocate(file, size)
	if errors.Is(err, errors.ErrUnsupported) {
		out.How = "write"
		err = write(file, size, &out.Allocated)
	} else if err == nil {
		out.Allocated = size
	}
	if err != nil {
		out.Refused = errnoName(err)
	}
	return out
}

// write writes size bytes to file, counting them in written, and syncs.
func write(file *os.File, size int64, written *int64) error {
	chunk := make([]byte, 1<<20)
	for *written < size {
		n, err := file.Write(chunk[:min(int64(len(chunk)), size-*written)])
		*written += int64(n)
		if err != nil {
			return err
		}
	}
	return file.Sync()
}

// Window tries address every windowInterval for length, from the moment
// the probe started: what code planted to run at a sandbox's start would
// reach.
func Window(address string, length time.Duration) WindowResult {
	out := WindowResult{Address: address, FirstOpen: -1}
	start := time.Now()
	for time.Since(start) < length {
		out.Attempts++
		if dial(address, windowInterval*5).Result == Open {
			out.Opens++
			if out.FirstOpen < 0 {
				out.FirstOpen = time.Since(start).Milliseconds()
			}
		}
		time.Sleep(windowInterval)
	}
	return out
}

// windowInterval is the pause between a window's attempts.
const windowInterval = 20 * time.Millisecond
