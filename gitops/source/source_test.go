package source

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/gittest"
)

func TestResolveAndClone(t *testing.T) {
	srv := gittest.New(t, "", "")
	first := srv.Commit("main", map[string]string{"a.yaml": "first"})
	srv.Tag("v1")
	second := srv.Commit("main", map[string]string{"a.yaml": "second"})
	ctx := context.Background()

	cases := []struct {
		name    string
		ref     v1.GitRef
		rev     Revision
		content string
	}{
		{"default branch", v1.GitRef{}, Revision("main@sha1:" + second), "second"},
		{"branch", v1.GitRef{Branch: "main"}, Revision("main@sha1:" + second), "second"},
		{"annotated tag", v1.GitRef{Tag: "v1"}, Revision("v1@sha1:" + first), "first"},
		{"commit", v1.GitRef{Commit: first}, Revision("sha1:" + first), "first"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rev, err := Resolve(ctx, srv.URL(), tc.ref, nil)
			if err != nil {
				t.Fatal(err)
			}
			if rev != tc.rev {
				t.Errorf("Resolve = %s, want %s", rev, tc.rev)
			}
			dir, rev, err := Fetch(ctx, srv.URL(), tc.ref, nil, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			if rev != tc.rev {
				t.Errorf("Fetch revision = %s, want %s", rev, tc.rev)
			}
			got, err := os.ReadFile(filepath.Join(dir, "a.yaml"))
			if err != nil || string(got) != tc.content {
				t.Errorf("a.yaml = %q, %v; want %q", got, err, tc.content)
			}
		})
	}
}

func TestMissingRef(t *testing.T) {
	srv := gittest.New(t, "", "")
	srv.Commit("main", map[string]string{"a.yaml": "x"})
	_, err := Resolve(context.Background(), srv.URL(), v1.GitRef{Branch: "nope"}, nil)
	if err == nil || !strings.Contains(err.Error(), `branch "nope" not found`) {
		t.Errorf("Resolve error = %v, want branch not found", err)
	}
	_, _, err = Fetch(context.Background(), srv.URL(), v1.GitRef{Tag: "v9"}, nil, t.TempDir())
	if err == nil || !strings.Contains(err.Error(), `tag "v9" not found`) {
		t.Errorf("Fetch error = %v, want tag not found", err)
	}
}

func TestBasicAuth(t *testing.T) {
	srv := gittest.New(t, "bot", "s3cret-token")
	srv.Commit("main", map[string]string{"a.yaml": "x"})
	ctx := context.Background()

	good, err := Auth(srv.URL(), "creds", map[string][]byte{KeyToken: []byte("s3cret-token"), KeyUsername: []byte("bot")})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := Fetch(ctx, srv.URL(), v1.GitRef{}, good, t.TempDir()); err != nil {
		t.Fatalf("fetch with the right token: %v", err)
	}
	bad, err := Auth(srv.URL(), "creds", map[string][]byte{KeyUsername: []byte("bot"), KeyPassword: []byte("wrong-pw")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Resolve(ctx, srv.URL(), v1.GitRef{}, bad)
	if err == nil || !strings.Contains(err.Error(), "authentication required") {
		t.Errorf("Resolve with a wrong password: %v, want an authentication error", err)
	}
	if err != nil && strings.Contains(err.Error(), "wrong-pw") {
		t.Errorf("error leaks the password: %v", err)
	}
	if _, err := Resolve(ctx, srv.URL(), v1.GitRef{}, nil); err == nil {
		t.Error("Resolve without credentials succeeded against a server that requires them")
	}
}

func TestAuthErrors(t *testing.T) {
	if _, err := Auth("ssh://git@example.com/r.git", "creds", map[string][]byte{KeyIdentity: []byte("k")}); err == nil ||
		!strings.Contains(err.Error(), "known_hosts") {
		t.Errorf("SSH without known_hosts: %v", err)
	}
	if _, err := Auth("git@example.com:r.git", "creds", map[string][]byte{KeyIdentity: []byte("not a key"), KeyKnownHosts: []byte("x")}); err == nil ||
		!strings.Contains(err.Error(), `"identity" is not a usable private key`) {
		t.Errorf("SSH with a broken key: %v", err)
	}
	if _, err := Auth("https://example.com/r.git", "creds", map[string][]byte{}); err == nil {
		t.Error("HTTPS with an empty secret: no error")
	}
	if got := sshUser("ssh://deploy@example.com/r.git"); got != "deploy" {
		t.Errorf("sshUser = %q", got)
	}
	if got := sshUser("git@example.com:r.git"); got != "git" {
		t.Errorf("sshUser scp-like = %q", got)
	}
}

func TestSSH(t *testing.T) {
	srv := gittest.New(t, "", "")
	commit := srv.Commit("main", map[string]string{"a.yaml": "x"})
	identity, public := gittest.ClientKey(t)
	url, knownHosts := srv.ServeSSH(public)
	ctx := context.Background()

	auth, err := Auth(url, "creds", map[string][]byte{KeyIdentity: identity, KeyKnownHosts: []byte(knownHosts + "\n")})
	if err != nil {
		t.Fatal(err)
	}
	rev, err := Resolve(ctx, url, v1.GitRef{Branch: "main"}, auth)
	if err != nil || rev != Revision("main@sha1:"+commit) {
		t.Fatalf("Resolve over SSH = %s, %v", rev, err)
	}
	if _, rev, err := Fetch(ctx, url, v1.GitRef{Branch: "main"}, auth, t.TempDir()); err != nil || rev != Revision("main@sha1:"+commit) {
		t.Fatalf("Fetch over SSH = %s, %v", rev, err)
	}

	otherIdentity, _ := gittest.ClientKey(t)
	wrongKey, err := Auth(url, "creds", map[string][]byte{KeyIdentity: otherIdentity, KeyKnownHosts: []byte(knownHosts)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Resolve(ctx, url, v1.GitRef{}, wrongKey); err == nil || !strings.Contains(err.Error(), "unable to authenticate") {
		t.Errorf("Resolve with an unauthorized key: %v", err)
	}

	_, otherHost := gittest.ClientKey(t)
	host, _, _ := strings.Cut(knownHosts, " ")
	wrongHost, err := Auth(url, "creds", map[string][]byte{KeyIdentity: identity,
		KeyKnownHosts: []byte(host + " " + string(ssh.MarshalAuthorizedKey(otherHost)))})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Resolve(ctx, url, v1.GitRef{}, wrongHost); err == nil || !strings.Contains(err.Error(), "key mismatch") {
		t.Errorf("Resolve against a host key not in known_hosts: %v", err)
	}
}
