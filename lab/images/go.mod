// The programs inside the lab's own images: the Pod sandbox's pause process
// and the probe the cluster tests run as Jobs. Standard library only, so they
// build in seconds with no downloads, and statically (CGO_ENABLED=0), so an
// image holds nothing but the one file.
module ptah-operator/lab/images

go 1.26.0
