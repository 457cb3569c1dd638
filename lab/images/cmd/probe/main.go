// Command probe is what the lab's cluster tests run in their Pods. Each
// subcommand shows one thing a real node does:
//
//	probe say LINE...          prints each LINE and exits 0 (logs through the API server)
//	probe terminate CODE MSG   writes MSG to the termination-message file and exits CODE
//	probe wait                 blocks until SIGTERM or SIGINT (deadlines, deletion)
//	probe whoami               asks the API server, through the kubernetes Service and
//	                           with the Pod's service-account token, who it is
//	probe dial HOST:PORT       tries a TCP connection and prints how it ended
package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

// The files the kubelet mounts into every Pod of a service account.
const (
	serviceAccountDir  = "/var/run/secrets/kubernetes.io/serviceaccount"
	terminationLogPath = "/dev/termination-log"
)

func main() {
	if len(os.Args) < 2 {
		fail("usage: probe say|terminate|wait|whoami|dial ...")
	}
	switch args := os.Args[2:]; os.Args[1] {
	case "say":
		for _, line := range args {
			fmt.Println(line)
		}
	case "terminate":
		if len(args) != 2 {
			fail("usage: probe terminate CODE MESSAGE")
		}
		code, err := strconv.Atoi(args[0])
		if err != nil {
			fail("the exit code %q is not a number", args[0])
		}
		if err := os.WriteFile(terminationLogPath, []byte(args[1]), 0o644); err != nil {
			fail("cannot write the termination message: %v", err)
		}
		os.Exit(code)
	case "wait":
		signals := make(chan os.Signal, 1)
		signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
		fmt.Println("waiting for a signal")
		fmt.Printf("stopped by %v\n", <-signals)
	case "whoami":
		whoami()
	case "dial":
		if len(args) != 1 {
			fail("usage: probe dial HOST:PORT")
		}
		conn, err := net.DialTimeout("tcp", args[0], 5*time.Second)
		if err != nil {
			fmt.Printf("dial %s: %v\n", args[0], err)
			return
		}
		_ = conn.Close()
		fmt.Printf("dial %s: connected\n", args[0])
	default:
		fail("unknown subcommand %q", os.Args[1])
	}
}

// whoami creates a SelfSubjectReview, which every authenticated caller may
// do, and prints the user name the API server saw. It finds the API server the
// way in-cluster clients do: the environment the kubelet sets from the
// kubernetes Service, so the request goes through kube-proxy's rules.
func whoami() {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		fail("KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set")
	}
	token, err := os.ReadFile(serviceAccountDir + "/token")
	if err != nil {
		fail("cannot read the service-account token: %v", err)
	}
	caPEM, err := os.ReadFile(serviceAccountDir + "/ca.crt")
	if err != nil {
		fail("cannot read the cluster CA: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		fail("the cluster CA file holds no certificate")
	}
	client := &http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}},
	}
	body := []byte(`{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`)
	url := "https://" + net.JoinHostPort(host, port) + "/apis/authentication.k8s.io/v1/selfsubjectreviews"
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		fail("cannot build the request: %v", err)
	}
	req.Header.Set("Authorization", "Bearer "+string(bytes.TrimSpace(token)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		fail("cannot reach the API server at %s: %v", url, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil || resp.StatusCode != http.StatusCreated {
		fail("the API server answered HTTP %d: %s (%v)", resp.StatusCode, raw, err)
	}
	var review struct {
		Status struct {
			UserInfo struct {
				Username string `json:"username"`
			} `json:"userInfo"`
		} `json:"status"`
	}
	if err := json.Unmarshal(raw, &review); err != nil {
		fail("the API server's answer is not a SelfSubjectReview: %v", err)
	}
	fmt.Printf("user=%s via=%s\n", review.Status.UserInfo.Username, net.JoinHostPort(host, port))
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "probe: "+format+"\n", args...)
	os.Exit(2)
}
