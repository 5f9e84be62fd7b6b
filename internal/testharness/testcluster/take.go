package testcluster

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// offered lists the clusters this package may take: those TestClustersEnv
// names (brought up by make test), else the user's KUBECONFIG, else the
// default local cluster, started when it is not running.
func offered(root, local string) ([]candidate, error) {
	if list := os.Getenv(TestClustersEnv); list != "" {
		if list == NoCluster {
			return nil, ErrNoCluster
		}
		names := strings.Split(list, ",")
		if only != "" {
			if !slices.Contains(names, only) {
				return nil, fmt.Errorf("%s=%s does not name cluster %q, which this package needs", TestClustersEnv, list, only)
			}
			names = []string{only}
		}
		var all []candidate
		for _, name := range names {
			kubeconfig, err := clusterScript(root, name, "kubeconfig")
			if err != nil {
				return nil, err
			}
			all = append(all, candidate{name: name, kubeconfig: kubeconfig})
		}
		return all, nil
	}
	if kubeconfig := os.Getenv("KUBECONFIG"); kubeconfig != "" {
		return []candidate{{kubeconfig: kubeconfig}}, nil
	}
	if _, err := clusterScript(root, "", "up"); err != nil {
		return nil, err
	}
	return []candidate{{kubeconfig: local}}, nil
}

// held keeps the lock file of the taken cluster open (and so locked) for as
// long as the test binary runs; the kernel releases it when the process
// exits, however it exits.
var held *os.File

// take locks the first free cluster of candidates, waiting while every one
// is held by another test package.
func take(candidates []candidate) (candidate, error) {
	files := make([]*os.File, 0, len(candidates))
	// Every lock file but the one held is closed however take returns.
	defer func() {
		for _, f := range files {
			if f != held {
				_ = f.Close()
			}
		}
	}()
	for _, c := range candidates {
		f, err := os.OpenFile(lockPath(c.kubeconfig), os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			return candidate{}, fmt.Errorf("failed to open the lock of cluster %s: %w", c.kubeconfig, err)
		}
		files = append(files, f)
	}
	waiting := false
	for {
		for i, f := range files {
			err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
			if errors.Is(err, syscall.EWOULDBLOCK) {
				continue
			}
			if err != nil {
				return candidate{}, fmt.Errorf("failed to lock cluster %s: %w", candidates[i].kubeconfig, err)
			}
			held = f
			return candidates[i], nil
		}
		if !waiting {
			waiting = true
			fmt.Fprintf(os.Stderr, "test cluster: waiting for one of %d clusters another test package holds\n", len(candidates))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// lockPath is the lock file of the cluster of kubeconfig, in the temporary
// directory: every test binary on this machine that uses the cluster agrees
// on it, wherever the kubeconfig lives.
func lockPath(kubeconfig string) string {
	if abs, err := filepath.Abs(kubeconfig); err == nil {
		kubeconfig = abs
	}
	sum := sha256.Sum256([]byte(kubeconfig))
	return filepath.Join(os.TempDir(), "agentsandbox-test-"+hex.EncodeToString(sum[:8])+".lock")
}
