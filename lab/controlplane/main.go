// Command controlplane runs a real kube-apiserver on top of an embedded etcd,
// both bound to 127.0.0.1, so the Python tests can exercise authentication,
// RBAC, admission, resourceVersion conflicts and the rest of the API server's
// semantics without Docker or downloads at test time.
//
// Once /readyz answers "ok" it prints a single JSON line on stdout (and writes
// the same document to <state-dir>/state.json) naming the server URL, the CA
// that signs the serving certificate and one bearer token per identity.
// SIGTERM or SIGINT shuts the API server down gracefully, then etcd, then
// removes whatever it created.
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

// identity is one user the static token file authenticates.
type identity struct {
	User   string   `json:"user"`
	Groups []string `json:"groups"`
	Token  string   `json:"token,omitempty"`
}

// defaultIdentities are the three callers every real-API test needs: the
// operator's own service account, an ordinary person with no grants at all, and
// a cluster admin to set the stage. system:masters bypasses RBAC entirely, which
// is exactly what a fixture that creates namespaces and bindings wants.
func defaultIdentities() map[string]identity {
	return map[string]identity{
		"manager": {
			User: "system:serviceaccount:ptah-system:ptah-operator",
			// A real service-account token carries these groups too; RBAC bindings
			// written against them must behave here as they would in a cluster.
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:ptah-system"},
		},
		"person": {User: "jane@example.com", Groups: []string{}},
		"admin":  {User: "admin", Groups: []string{"system:masters"}},
	}
}

// state is what the launcher needs to reach the server; it is both printed and
// written to <state-dir>/state.json.
type state struct {
	Server     string              `json:"server"`
	CA         string              `json:"ca"`
	Etcd       string              `json:"etcd"`
	StateDir   string              `json:"state_dir"`
	PID        int                 `json:"pid"`
	Identities map[string]identity `json:"identities"`
}

func main() {
	os.Exit(run())
}

func run() int {
	log.SetPrefix("controlplane: ")
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	if len(os.Args) > 1 && os.Args[1] == kcmSubcommand {
		return runControllerManager(os.Args[2:])
	}
	if len(os.Args) > 1 {
		if component, ok := nodeComponents[os.Args[1]]; ok {
			return runNodeComponent(component, os.Args[2:])
		}
	}

	fs := flag.NewFlagSet("controlplane", flag.ContinueOnError)
	stateDir := fs.String("state-dir", "", "directory for etcd data, keys, certificates and state.json; a temporary directory, removed on exit, when empty")
	identitiesPath := fs.String("identities", "", "JSON file mapping identity name to {\"user\": ..., \"groups\": [...]}; manager, person and admin when empty")
	exitOnStdinEOF := fs.Bool("exit-on-stdin-eof", false, "shut down when stdin reaches end of file, so the server cannot outlive a launcher that dies without signalling it")
	controllers := fs.String("controllers", "", "comma-separated kube-controller-manager controllers to run, e.g. job-controller,garbage-collector-controller; none when empty")
	readyTimeout := fs.Duration("ready-timeout", 3*time.Minute, "give up when etcd or the API server is not ready within this long")
	address := fs.String("address", "127.0.0.1", "the address the API server binds to and advertises; a non-loopback address (a node's bridge) also publishes it as the kubernetes Service's endpoint")
	serviceAccountAdmission := fs.Bool("service-account-admission", false, "keep the ServiceAccount admission plugin on; only for a cluster whose controller manager runs serviceaccount-controller, which creates the default service account every Pod needs")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: controlplane [flags] [-- extra kube-apiserver flags]\n")
		fs.PrintDefaults()
	}
	// Everything after "--" goes to kube-apiserver untouched, so a test that needs
	// a feature gate or an extra admission plugin does not need a new build.
	if err := fs.Parse(os.Args[1:]); err != nil {
		return 2
	}
	extraArgs := fs.Args()
	bindIP := net.ParseIP(*address)
	if bindIP == nil || bindIP.To4() == nil {
		log.Printf("--address %q is not an IPv4 address", *address)
		return 2
	}

	// Registering the API server's signal handler first means a SIGTERM that
	// arrives while etcd is still starting is caught, and the temporary
	// directory is still removed.
	cmd := app.NewAPIServerCommand()
	ctx := cmd.Context()

	dir, cleanup, err := prepareDir(*stateDir)
	if err != nil {
		log.Print(err)
		return 1
	}
	defer cleanup()

	ids, err := loadIdentities(*identitiesPath)
	if err != nil {
		log.Print(err)
		return 1
	}
	authenticated := maps.Clone(ids)
	var kcmControllers []string
	if *controllers != "" {
		kcmControllers = strings.Split(*controllers, ",")
		if _, taken := ids[kcmSubcommand]; taken {
			log.Printf("identity name %q is reserved for the controller manager", kcmSubcommand)
			return 1
		}
		kcmIdentity := kcmUser
		if kcmIdentity.Token, err = newKCMToken(); err != nil {
			log.Print(err)
			return 1
		}
		authenticated[kcmSubcommand] = kcmIdentity
	}
	tokenFile, err := writeTokenFile(dir, authenticated)
	if err != nil {
		log.Print(err)
		return 1
	}
	saPub, saKey, err := writeServiceAccountKeys(dir)
	if err != nil {
		log.Print(err)
		return 1
	}
	// etcd stays on loopback whatever the API server's address: only the API
	// server talks to it.
	ports, err := freePorts("127.0.0.1", 2)
	if err != nil {
		log.Print(err)
		return 1
	}
	apiPorts, err := freePorts(*address, 1)
	if err != nil {
		log.Print(err)
		return 1
	}
	etcdClientURL := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))}
	etcdPeerURL := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1]))}
	apiPort := apiPorts[0]
	server := "https://" + net.JoinHostPort(*address, strconv.Itoa(apiPort))

	etcd, err := startEtcd(ctx, filepath.Join(dir, "etcd"), etcdClientURL, etcdPeerURL, *readyTimeout)
	if err != nil {
		log.Print(err)
		return 1
	}
	defer etcd.Close()

	certDir := filepath.Join(dir, "certs")
	args := []string{
		"--etcd-servers=" + etcdClientURL.String(),
		"--bind-address=" + *address,
		"--advertise-address=" + *address,
		"--secure-port=" + strconv.Itoa(apiPort),
		// No --tls-cert-file: the API server generates its own CA and serving
		// certificate here, and we hand that CA to the clients.
		"--cert-dir=" + certDir,
		"--token-auth-file=" + tokenFile,
		// Node first: a kubelet's requests (as system:node:NAME in
		// system:nodes) are authorized by what is bound to its node, and RBAC
		// answers everyone else exactly as before.
		"--authorization-mode=Node,RBAC",
		// The Node authorizer's partner, and not on by default: it confines a
		// kubelet's writes to its own Node object and the Pods bound to it.
		"--enable-admission-plugins=NodeRestriction",
		"--service-account-issuer=" + server,
		"--service-account-key-file=" + saPub,
		"--service-account-signing-key-file=" + saKey,
		"--service-cluster-ip-range=10.0.0.0/24",
		// By default a graceful shutdown waits up to a minute for open watches,
		// and an operator under test always has some. This mode drains ordinary
		// requests and then gives watches two seconds.
		"--shutdown-send-retry-after=true",
	}
	if !*serviceAccountAdmission {
		// Unless the controller manager runs the service-account controller
		// that creates each namespace's "default" service account, the
		// ServiceAccount admission plugin rejects every Pod. The rest of the
		// default plugin set stays on, including NodeRestriction,
		// ValidatingAdmissionWebhook and ValidatingAdmissionPolicy.
		args = append(args, "--disable-admission-plugins=ServiceAccount")
	}
	if bindIP.IsLoopback() {
		// The endpoint reconciler would publish a loopback address as the
		// "kubernetes" service's endpoint, which Endpoints validation
		// rejects, and it would log that failure forever. A node's bridge
		// address is published, so pods reach the API server through the
		// Service.
		args = append(args, "--endpoint-reconciler-type=none")
	}
	cmd.SetArgs(append(args, extraArgs...))
	// stdout carries exactly one line, the state document; everything the API
	// server has to say goes to stderr.
	cmd.SetOut(os.Stderr)
	cmd.SetErr(os.Stderr)

	go func() {
		select {
		case err := <-etcd.Err():
			log.Printf("etcd failed, shutting down: %v", err)
			stopSelf(ctx)
		case <-ctx.Done():
		}
	}()
	if *exitOnStdinEOF {
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			log.Print("stdin closed, shutting down")
			stopSelf(ctx)
		}()
	}
	// The controller manager starts once the API server is ready and stops as
	// soon as shutdown begins: the API server's graceful shutdown waits for its
	// open watch connections, so stopping it afterwards would stall shutdown
	// for a minute. mu orders start and stop so a shutdown that races with
	// readiness cannot leave it running.
	var (
		mu           sync.Mutex
		kcm          *controllerManager
		shuttingDown bool
	)
	stopKCM := func() {
		mu.Lock()
		defer mu.Unlock()
		shuttingDown = true
		if kcm != nil {
			kcm.stop(10 * time.Second)
		}
	}
	startKCM := func(st state) error {
		if len(kcmControllers) == 0 {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		if shuttingDown {
			return errors.New("shutting down before the controller manager could start")
		}
		cm, err := startControllerManager(dir, st.Server, st.CA, saKey, authenticated[kcmSubcommand].Token, kcmControllers)
		if err != nil {
			return err
		}
		kcm = cm
		go func() {
			select {
			case <-cm.exited:
				log.Printf("kube-controller-manager exited unexpectedly (%v), shutting down", cm.err)
				stopSelf(ctx)
			case <-ctx.Done():
				stopKCM()
			}
		}()
		return nil
	}
	go func() {
		st := state{
			Server:     server,
			CA:         filepath.Join(dir, "ca.crt"),
			Etcd:       etcdClientURL.String(),
			StateDir:   dir,
			PID:        os.Getpid(),
			Identities: ids,
		}
		if err := announceWhenReady(ctx, st, filepath.Join(certDir, "apiserver.crt"), *readyTimeout, startKCM); err != nil {
			log.Printf("the API server did not become ready, shutting down: %v", err)
			stopSelf(ctx)
		}
	}()

	code := cli.Run(cmd)
	// Usually a no-op by now; covers the API server exiting without a signal.
	stopKCM()
	// etcd logs its closing listeners as errors; say so before they appear.
	log.Printf("kube-apiserver exited with code %d; stopping etcd (its \"server closed\" errors are expected)", code)
	return code
}

var stopOnce sync.Once

// stopSelf sends SIGTERM to this process so that every shutdown path goes
// through the API server's own graceful termination. Only once, and not when
// a signal has already started the shutdown (ctx is done): the API server
// treats a second signal as "exit now", skipping etcd's shutdown and the
// cleanup.
func stopSelf(ctx context.Context) {
	if ctx.Err() != nil {
		return
	}
	stopOnce.Do(func() {
		if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
			log.Printf("cannot signal self: %v", err)
			os.Exit(1)
		}
	})
}

func prepareDir(stateDir string) (string, func(), error) {
	if stateDir == "" {
		dir, err := os.MkdirTemp("", "controlplane-")
		if err != nil {
			return "", nil, fmt.Errorf("cannot create a temporary directory: %w", err)
		}
		return dir, func() {
			if err := os.RemoveAll(dir); err != nil {
				log.Printf("cannot remove %s: %v", dir, err)
			}
		}, nil
	}
	dir, err := filepath.Abs(stateDir)
	if err != nil {
		return "", nil, fmt.Errorf("cannot resolve state directory %s: %w", stateDir, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", nil, fmt.Errorf("cannot create state directory %s: %w", dir, err)
	}
	// The caller chose the directory, so the caller decides when it goes; stale
	// readiness from an earlier run must not be mistaken for this one's.
	if err := os.Remove(filepath.Join(dir, "state.json")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", nil, fmt.Errorf("cannot remove stale state file: %w", err)
	}
	return dir, func() {}, nil
}

func loadIdentities(path string) (map[string]identity, error) {
	if path == "" {
		return withTokens(defaultIdentities())
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read identities file: %w", err)
	}
	var ids map[string]identity
	if err := json.Unmarshal(raw, &ids); err != nil {
		return nil, fmt.Errorf("identities file %s is not a JSON object of {user, groups}: %w", path, err)
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("identities file %s names no identity", path)
	}
	for name, id := range ids {
		if id.User == "" {
			return nil, fmt.Errorf("identity %q in %s has no user", name, path)
		}
		if id.Groups == nil {
			id.Groups = []string{}
			ids[name] = id
		}
	}
	return withTokens(ids)
}

func withTokens(ids map[string]identity) (map[string]identity, error) {
	out := make(map[string]identity, len(ids))
	for name, id := range ids {
		buf := make([]byte, 32)
		if _, err := rand.Read(buf); err != nil {
			return nil, fmt.Errorf("cannot generate a token: %w", err)
		}
		id.Token = hex.EncodeToString(buf)
		out[name] = id
	}
	return out, nil
}

// writeTokenFile writes the --token-auth-file CSV: token, user, uid, groups.
// encoding/csv quotes the groups column exactly as the API server's own CSV
// reader expects.
func writeTokenFile(dir string, ids map[string]identity) (string, error) {
	path := filepath.Join(dir, "tokens.csv")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return "", fmt.Errorf("cannot create token file: %w", err)
	}
	names := make([]string, 0, len(ids))
	for name := range ids {
		names = append(names, name)
	}
	sort.Strings(names)
	w := csv.NewWriter(f)
	for _, name := range names {
		id := ids[name]
		record := []string{id.Token, id.User, name}
		// An empty groups column is not "no groups": the API server splits it
		// into one group named "", so the column is left out instead.
		if len(id.Groups) > 0 {
			record = append(record, strings.Join(id.Groups, ","))
		}
		if err := w.Write(record); err != nil {
			_ = f.Close()
			return "", fmt.Errorf("cannot write token file: %w", err)
		}
	}
	w.Flush()
	if err := w.Error(); err != nil {
		_ = f.Close()
		return "", fmt.Errorf("cannot write token file: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("cannot write token file: %w", err)
	}
	return path, nil
}

// writeServiceAccountKeys generates the key the API server signs
// service-account tokens with. A fresh key per run means no test can depend on
// a token minted by another run.
func writeServiceAccountKeys(dir string) (pubPath, keyPath string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", fmt.Errorf("cannot generate the service-account key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return "", "", fmt.Errorf("cannot encode the service-account key: %w", err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return "", "", fmt.Errorf("cannot encode the service-account public key: %w", err)
	}
	keyPath = filepath.Join(dir, "sa.key")
	pubPath = filepath.Join(dir, "sa.pub")
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return "", "", fmt.Errorf("cannot write the service-account key: %w", err)
	}
	if err := os.WriteFile(pubPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o644); err != nil {
		return "", "", fmt.Errorf("cannot write the service-account public key: %w", err)
	}
	return pubPath, keyPath, nil
}

// freePorts asks the kernel for n distinct free loopback ports. All listeners
// stay open until every port is chosen so the same port cannot come back
// twice; another process could still take one before we bind it, which then
// fails loudly at startup rather than silently.
func freePorts(address string, n int) ([]int, error) {
	listeners := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", net.JoinHostPort(address, "0"))
		if err != nil {
			return nil, fmt.Errorf("cannot find a free port on %s: %w", address, err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func startEtcd(ctx context.Context, dataDir string, clientURL, peerURL url.URL, timeout time.Duration) (*embed.Etcd, error) {
	cfg := embed.NewConfig()
	cfg.Name = "controlplane"
	cfg.Dir = dataDir
	cfg.ListenClientUrls = []url.URL{clientURL}
	cfg.AdvertiseClientUrls = []url.URL{clientURL}
	cfg.ListenPeerUrls = []url.URL{peerURL}
	cfg.AdvertisePeerUrls = []url.URL{peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	// The data lives only as long as one test session; fsync buys durability
	// nobody will use and costs seconds on every write-heavy test.
	cfg.UnsafeNoFsync = true
	cfg.LogLevel = "error"
	cfg.LogOutputs = []string{"stderr"}

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("cannot start etcd: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
		return e, nil
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("etcd failed while starting: %w", err)
	case <-ctx.Done():
		e.Close()
		return nil, errors.New("interrupted while etcd was starting")
	case <-time.After(timeout):
		e.Close()
		return nil, fmt.Errorf("etcd was not ready within %s", timeout)
	}
}

// announceWhenReady waits for the API server's self-generated certificate,
// extracts its CA, waits for /readyz to answer "ok" over TLS verified by that
// CA, calls beforeAnnounce, and only then publishes the state document.
func announceWhenReady(ctx context.Context, st state, servingCert string, timeout time.Duration, beforeAnnounce func(state) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	var caPEM []byte
	if err := poll(ctx, func() (bool, error) {
		ca, err := caFromChain(servingCert)
		if err != nil {
			// The file does not exist yet or is half written; both resolve
			// themselves within a moment of the API server starting.
			return false, nil
		}
		caPEM = ca
		return true, nil
	}); err != nil {
		return fmt.Errorf("no serving certificate with a CA appeared at %s: %w", servingCert, err)
	}
	if err := writeFileAtomic(st.CA, caPEM, 0o644); err != nil {
		return err
	}

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	client := &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}},
	}
	defer client.CloseIdleConnections()
	admin, ok := st.Identities["admin"]
	lastProblem := "no answer yet"
	if err := poll(ctx, func() (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, st.Server+"/readyz", nil)
		if err != nil {
			return false, err
		}
		// /readyz is open to anonymous callers by default, but a token proves
		// authentication works too; any identity will do when there is no admin.
		if ok {
			req.Header.Set("Authorization", "Bearer "+admin.Token)
		}
		resp, err := client.Do(req)
		if err != nil {
			lastProblem = err.Error()
			return false, nil
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK && strings.TrimSpace(string(body)) == "ok" {
			return true, nil
		}
		lastProblem = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
		return false, nil
	}); err != nil {
		return fmt.Errorf("/readyz never answered ok (last: %s): %w", lastProblem, err)
	}

	if err := beforeAnnounce(st); err != nil {
		return err
	}
	doc, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("cannot encode the state document: %w", err)
	}
	if err := writeFileAtomic(filepath.Join(st.StateDir, "state.json"), append(doc, '\n'), 0o600); err != nil {
		return err
	}
	if _, err := os.Stdout.Write(append(doc, '\n')); err != nil {
		return fmt.Errorf("cannot print the state document: %w", err)
	}
	log.Printf("ready at %s", st.Server)
	return nil
}

// caFromChain returns the CA certificate (PEM) from the chain the API server
// writes for its self-signed serving certificate: the leaf followed by its CA.
func caFromChain(path string) ([]byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	for block, rest := pem.Decode(raw); block != nil; block, rest = pem.Decode(rest) {
		if block.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		if cert.IsCA {
			return pem.EncodeToMemory(block), nil
		}
	}
	return nil, errors.New("no CA certificate in the chain")
}

// poll calls check with a short, growing interval until it reports done,
// returns an error, or ctx ends.
func poll(ctx context.Context, check func() (bool, error)) error {
	interval := 20 * time.Millisecond
	for {
		done, err := check()
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
		interval = min(interval*2, 500*time.Millisecond)
	}
}

func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	return nil
}
