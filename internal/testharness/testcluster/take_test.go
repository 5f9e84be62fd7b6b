package testcluster

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// lockAsOtherPackage holds the lock of kubeconfig through an open file of
// its own, as another test binary would, until the test ends or release is
// called.
func lockAsOtherPackage(t *testing.T, kubeconfig string) (release func()) {
	t.Helper()
	f, err := os.OpenFile(lockPath(kubeconfig), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatalf("lock %s: %v", kubeconfig, err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return func() { _ = f.Close() }
}

func candidates(t *testing.T) []candidate {
	dir := t.TempDir()
	return []candidate{
		{name: "one", kubeconfig: filepath.Join(dir, "kubeconfig-one")},
		{name: "two", kubeconfig: filepath.Join(dir, "kubeconfig-two")},
	}
}

// TestTakeSkipsAHeldCluster: a package never shares a cluster with another
// one that holds it.
func TestTakeSkipsAHeldCluster(t *testing.T) {
	all := candidates(t)
	lockAsOtherPackage(t, all[0].kubeconfig)
	got, err := take(all)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = held.Close() })
	if got != all[1] {
		t.Fatalf("took %+v while %s was held; want %+v", got, all[0].kubeconfig, all[1])
	}
}

// TestTakeWaitsForAFreeCluster: with every cluster held, take returns the
// one released first, and only then.
func TestTakeWaitsForAFreeCluster(t *testing.T) {
	all := candidates(t)
	lockAsOtherPackage(t, all[0].kubeconfig)
	release := lockAsOtherPackage(t, all[1].kubeconfig)
	released := make(chan time.Time, 1)
	go func() {
		time.Sleep(700 * time.Millisecond)
		released <- time.Now()
		release()
	}()
	got, err := take(all)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = held.Close() })
	if got != all[1] {
		t.Fatalf("took %+v; want the released %+v", got, all[1])
	}
	select {
	case <-released:
	default:
		t.Fatal("take returned a cluster before any was released")
	}
}

// TestNoClusterIsOfferedOnPurpose: TestClustersEnv=none offers nothing,
// with the error Get turns into a skip, before any cluster is started.
func TestNoClusterIsOfferedOnPurpose(t *testing.T) {
	t.Setenv(TestClustersEnv, NoCluster)
	if got, err := offered(t.TempDir(), "unused"); !errors.Is(err, ErrNoCluster) || got != nil {
		t.Errorf("offered: %v, %v; want ErrNoCluster", got, err)
	}
}
