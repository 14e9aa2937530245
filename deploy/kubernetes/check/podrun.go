package check

// PodRun describes how to run the one Deployment's pod outside a cluster,
// as the kubelet would: what the e2e suite turns into docker flags
// (`go run ./cmd/podrun`), so the pod's settings are written once, in the
// manifests.
type PodRun struct {
	Name           string         `json:"name"`
	InitContainers []ContainerRun `json:"init_containers"`
	Containers     []ContainerRun `json:"containers"`
}

// ContainerRun is one container of PodRun.
type ContainerRun struct {
	Name    string   `json:"name"`
	Image   string   `json:"image"`
	Command []string `json:"command,omitempty"` // replaces the image's entrypoint
	Args    []string `json:"args,omitempty"`
	// User and Group run the process; Groups are its supplementary groups
	// (fsGroup, supplementalGroups). -1: not set by the manifest.
	User            int64    `json:"user"`
	Group           int64    `json:"group"`
	Groups          []int64  `json:"groups,omitempty"`
	ReadOnlyRoot    bool     `json:"read_only_root"`
	NoNewPrivileges bool     `json:"no_new_privileges"`
	CapDrop         []string `json:"cap_drop,omitempty"`
	CapAdd          []string `json:"cap_add,omitempty"`
	// Env is the environment after envFrom, env and the downward API.
	Env         []EnvVar    `json:"env"`
	MemoryLimit int64       `json:"memory_limit,omitempty"` // bytes
	Tmpfs       []Tmpfs     `json:"tmpfs,omitempty"`        // emptyDir volumes
	Files       []FileMount `json:"files,omitempty"`        // secret, configMap, projected volumes
	// Readiness is the HTTP readiness probe, its port resolved.
	Readiness *HTTPProbe `json:"readiness,omitempty"`
}

// EnvVar is one variable of a container's environment.
type EnvVar struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Tmpfs is an emptyDir: the kubelet makes it mode 0777.
type Tmpfs struct {
	Path string `json:"path"`
	Mode uint32 `json:"mode"`
	Size int64  `json:"size,omitempty"` // bytes; 0: no limit
}

// FileMount is a volume of files written by the kubelet.
type FileMount struct {
	Volume   string `json:"volume"`
	Path     string `json:"path"`
	ReadOnly bool   `json:"read_only"`
	Files    []File `json:"files"`
}

// File is one file of a FileMount, owned as the kubelet owns it.
type File struct {
	Name string `json:"name"`
	Data []byte `json:"data"`
	Mode uint32 `json:"mode"`
	UID  int64  `json:"uid"`
	GID  int64  `json:"gid"`
}

// HTTPProbe is an httpGet probe.
type HTTPProbe struct {
	Path string `json:"path"`
	Port int32  `json:"port"`
}
