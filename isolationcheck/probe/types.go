package probe

// Facts are what a process sees of itself and its machine.
type Facts struct {
	UID        int    `json:"uid"`
	GID        int    `json:"gid"`
	CapEff     string `json:"capEff"`
	CapBnd     string `json:"capBnd"`
	NoNewPrivs string `json:"noNewPrivs"`
	// Seccomp is the mode of /proc/self/status: 0 none, 2 filter.
	Seccomp string `json:"seccomp"`
	// ServiceAccountToken is whether Kubernetes mounted a token.
	ServiceAccountToken bool `json:"serviceAccountToken"`
	// PID1 is the command line of process 1 in the sandbox's PID namespace.
	PID1 string `json:"pid1"`
	// Processes is how many processes are visible; NodeProcesses those of
	// them that are the node's own (a shared PID namespace).
	Processes     int      `json:"processes"`
	NodeProcesses []string `json:"nodeProcesses,omitempty"`
	// Kernel is /proc/version; KernelLog the first lines of the kernel's
	// log where the process may read it (gVisor's says so).
	Kernel    string `json:"kernel"`
	KernelLog string `json:"kernelLog,omitempty"`
	// RootWritable is whether a file can be made at the root.
	RootWritable bool `json:"rootWritable"`
	// IPv4 and IPv6 are the addresses of the non-loopback interfaces
	// (IPv6 link-local ones with their zone); Gateway the default IPv4
	// route's.
	IPv4    []string `json:"ipv4"`
	IPv6    []string `json:"ipv6"`
	Gateway string   `json:"gateway,omitempty"`
	// Service is the API server's service address Kubernetes puts in
	// every container's environment (KUBERNETES_SERVICE_HOST and _PORT).
	Service string `json:"service,omitempty"`
	// Workspace is the workspace's file system, when one was named.
	Workspace *Space `json:"workspace,omitempty"`
	// Problems are facts that could not be read.
	Problems []string `json:"problems,omitempty"`
}

// Space is a file system's size and what is left of it.
type Space struct {
	Total int64 `json:"total"`
	Free  int64 `json:"free"`
}

// Reach is the outcome of one connection attempt.
type Reach struct {
	Address string `json:"address"`
	// Result is open (a listener answered), refused, timeout, unreachable
	// or error.
	Result string `json:"result"`
	Detail string `json:"detail,omitempty"`
}

// The results of a Reach.
const (
	Open        = "open"
	Refused     = "refused"
	Timeout     = "timeout"
	Unreachable = "unreachable"
	Failed      = "error"
)

// ScanResult is a range of ports tried on one host.
type ScanResult struct {
	Host  string `json:"host"`
	Tried int    `json:"tried"`
	Open  []int  `json:"open"`
	// Results counts the attempts by Reach result.
	Results map[string]int `json:"results"`
}

// ListenResult is who connected to a listener while it listened.
type ListenResult struct {
	Accepted []string `json:"accepted"`
}

// Listening is the line a listener prints once it accepts connections.
const Listening = "listening"

// ProcessesResult is how many processes a probe started before the
// kernel refused one, and the refusal's errno (EAGAIN at a pids limit), ""
// when it refused none up to the limit asked for.
type ProcessesResult struct {
	Started int    `json:"started"`
	Refused string `json:"refused,omitempty"`
}

// FillResult is how much of a file system one file could take.
type FillResult struct {
	Requested int64 `json:"requested"`
	// Allocated is how much of it the file system gave.
	Allocated int64 `json:"allocated"`
	// Refused is the errno's name that stopped it (ENOSPC, EDQUOT), or "".
	Refused string `json:"refused,omitempty"`
	// How is fallocate, or write where the file system has no fallocate.
	How string `json:"how"`
}

// WindowResult is a destination tried again and again from the moment a
// process started.
type WindowResult struct {
	Address  string `json:"address"`
	Attempts int    `json:"attempts"`
	// FirstOpen is when a connection first succeeded, in milliseconds
	// after the probe started; -1 when none did.
	FirstOpen int64 `json:"firstOpen"`
	Opens     int   `json:"opens"`
}

// DNSResult is a query for a name no allow-list holds, sent to every
// resolver a sandbox's code could ask.
type DNSResult struct {
	// Name is the name asked for.
	Name string `json:"name"`
	// Configured are the resolvers /etc/resolv.conf names (host:port).
	Configured []string `json:"configured"`
	// Answers are the outcomes, resolv.conf's resolvers first.
	Answers  []DNSAnswer `json:"answers"`
	Problems []string    `json:"problems,omitempty"`
}

// DNSAnswer is one resolver's outcome.
type DNSAnswer struct {
	Server string `json:"server"`
	// Result is answered, or what kept the answer away: refused, timeout,
	// unreachable or error.
	Result string `json:"result"`
	// Rcode is the answer's response code (NOERROR, NXDOMAIN, SERVFAIL,
	// REFUSED, ...).
	Rcode  string `json:"rcode,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// Answered is a DNSAnswer's Result when the resolver replied.
const Answered = "answered"

// ICMPResult is an echo request sent to each of some addresses.
type ICMPResult struct {
	// Socket is why no ICMP socket could be opened (EACCES when
	// net.ipv4.ping_group_range excludes the process's group), "" when one
	// was; then Echoes are the outcomes.
	Socket string     `json:"socket,omitempty"`
	Echoes []ICMPEcho `json:"echoes"`
}

// ICMPEcho is one address's outcome.
type ICMPEcho struct {
	Address string `json:"address"`
	// Result is replied, timeout or error.
	Result string `json:"result"`
	Detail string `json:"detail,omitempty"`
}

// Replied is an ICMPEcho's Result when the address answered.
const Replied = "replied"
