// kstatus: the kstatus computation (sigs.k8s.io/cli-utils/pkg/kstatus/status), the
// one Flux and cli-utils' appliers use to decide whether a resource is reconciled,
// run over objects a test hands it. Reads a JSON array of objects on standard
// input and writes a JSON array of {"status", "message"}, one per object, in
// order. Checkout-only: tests/gitops/test_kstatus.py runs it; `make kstatus`
// builds it.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

type result struct {
	Status  string `json:"status"`
	Message string `json:"message"`
}

func main() {
	raw, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	// apimachinery's decoder, not encoding/json's: integers stay int64, as the
	// accessors kstatus uses (metadata.generation) require.
	var objects []interface{}
	if err := utiljson.Unmarshal(raw, &objects); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	out := make([]result, 0, len(objects))
	for i, obj := range objects {
		fields, ok := obj.(map[string]interface{})
		if !ok {
			fmt.Fprintf(os.Stderr, "object %d is not a JSON object\n", i)
			os.Exit(2)
		}
		computed, err := status.Compute(&unstructured.Unstructured{Object: fields})
		if err != nil {
			fmt.Fprintf(os.Stderr, "object %d: %v\n", i, err)
			os.Exit(1)
		}
		out = append(out, result{Status: computed.Status.String(), Message: computed.Message})
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
}
