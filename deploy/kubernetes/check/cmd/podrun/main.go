// Command podrun renders a kustomization of deploy/kubernetes with what an
// operator adds (Secrets, ConfigMap values, the image) and prints how the
// kubelet would run its Deployment's pod (check.PodRun) as JSON. The e2e
// suite runs the image on Docker from it, so the pod's settings are written
// once, in the manifests.
//
//	go run ./cmd/podrun -dir base -pod shardcron-0 \
//	  -image shardcron=shardcron:latest \
//	  -secret shardcron-http-tokens=read=/path/read \
//	  -literal shardcron-etcd=SHARDCRON_ETCD_ENDPOINTS=http://etcd:2379
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/shardcron/shardcron/deploy/kubernetes/check"
)

// list is a repeatable flag.
type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "podrun:", err)
		os.Exit(1)
	}
}

func run() error {
	var secrets, literals, images list
	root := flag.String("root", "..", "the deploy/kubernetes directory")
	dir := flag.String("dir", "base", "the kustomization to render, relative to -root")
	pod := flag.String("pod", "shardcron-0", "the pod's name (its metadata.name)")
	flag.Var(&secrets, "secret", "NAME=KEY=FILE: a key of a generated Secret, from a file (repeatable)")
	flag.Var(&literals, "literal", "NAME=KEY=VALUE: merged into the generated ConfigMap NAME (repeatable)")
	flag.Var(&images, "image", "NAME=REF: the image NAME runs as REF (repeatable)")
	flag.Parse()

	fsys, err := check.LoadTree(*root)
	if err != nil {
		return err
	}
	overlay := path.Join(check.Tree, "overlays", "podrun")
	k := map[string]any{
		"apiVersion": "kustomize.config.k8s.io/v1beta1",
		"kind":       "Kustomization",
		"resources":  []string{path.Join("..", "..", *dir)},
	}
	gens, err := secretGenerators(fsys, overlay, secrets)
	if err != nil {
		return err
	}
	cms, err := configMapMerges(literals)
	if err != nil {
		return err
	}
	imgs, err := imageOverrides(images)
	if err != nil {
		return err
	}
	if gens != nil {
		k["secretGenerator"] = gens
	}
	if cms != nil {
		k["configMapGenerator"] = cms
	}
	if imgs != nil {
		k["images"] = imgs
	}
	y, err := yaml.Marshal(k)
	if err != nil {
		return err
	}
	if err := fsys.WriteFile(path.Join(overlay, "kustomization.yaml"), y); err != nil {
		return err
	}
	objs, err := check.Render(fsys, overlay)
	if err != nil {
		return err
	}
	desc, err := check.Describe(objs, *pod)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(desc)
}

// secretGenerators writes each -secret file into the overlay and returns
// the kustomization's secretGenerator entries, one per Secret, in the order
// first named.
func secretGenerators(fsys filesys.FileSystem, overlay string, secrets list) ([]map[string]any, error) {
	var gens []map[string]any
	files := map[string][]string{}
	var order []string
	for i, s := range secrets {
		name, key, file, ok := split3(s)
		if !ok {
			return nil, fmt.Errorf("-secret %q: want NAME=KEY=FILE", s)
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("-secret %s: %w", name, err)
		}
		f := fmt.Sprintf("secret-%d", i)
		if err := fsys.WriteFile(path.Join(overlay, f), b); err != nil {
			return nil, err
		}
		if _, seen := files[name]; !seen {
			order = append(order, name)
		}
		files[name] = append(files[name], key+"="+f)
	}
	for _, name := range order {
		gens = append(gens, map[string]any{"name": name, "files": files[name]})
	}
	return gens, nil
}

// configMapMerges returns the configMapGenerator entries that merge each
// -literal into its ConfigMap.
func configMapMerges(literals list) ([]map[string]any, error) {
	var cms []map[string]any
	lits := map[string][]string{}
	var order []string
	for _, l := range literals {
		name, kv, ok := strings.Cut(l, "=")
		if !ok || !strings.Contains(kv, "=") {
			return nil, fmt.Errorf("-literal %q: want NAME=KEY=VALUE", l)
		}
		if _, seen := lits[name]; !seen {
			order = append(order, name)
		}
		lits[name] = append(lits[name], kv)
	}
	for _, name := range order {
		cms = append(cms, map[string]any{"name": name, "behavior": "merge", "literals": lits[name]})
	}
	return cms, nil
}

// imageOverrides returns the kustomization's images entries for -image.
func imageOverrides(images list) ([]map[string]any, error) {
	var imgs []map[string]any
	for _, im := range images {
		name, ref, ok := strings.Cut(im, "=")
		if !ok {
			return nil, fmt.Errorf("-image %q: want NAME=REF", im)
		}
		newName, tag := ref, ""
		if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
			newName, tag = ref[:i], ref[i+1:]
		}
		imgs = append(imgs, map[string]any{"name": name, "newName": newName, "newTag": tag})
	}
	return imgs, nil
}

func split3(s string) (a, b, c string, ok bool) {
	a, rest, ok1 := strings.Cut(s, "=")
	b, c, ok2 := strings.Cut(rest, "=")
	if !ok1 || !ok2 || a == "" || b == "" || c == "" {
		return "", "", "", false
	}
	return a, b, c, true
}
