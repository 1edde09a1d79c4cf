package fleetstatus

import (
	"context"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

// WriterConfig configures a Writer.
type WriterConfig struct {
	// Dynamic writes statuses and Bundle mirrors to the management
	// cluster. Required.
	Dynamic dynamic.Interface
	// Kube records Events. Optional: without it no Event is recorded.
	Kube kubernetes.Interface
	// Temporal is read for Flotilla's status. Required.
	Temporal client.Client
	// Logger. Optional: default zap.NewNop().
	Logger *zap.Logger
	// MinInterval is the least time between two writes of one resource,
	// and how often an unsettled resource is read. Optional: default 2s.
	MinInterval time.Duration
	// SettledInterval is how often a settled resource is read. Optional:
	// default 10s (at least MinInterval).
	SettledInterval time.Duration
	// DataConverter decodes the clusters' targeting memos when a
	// ClusterGroup's status lists them: the Temporal client's. Optional:
	// without it every cluster is queried.
	DataConverter converter.DataConverter
	// Parallelism bounds the resources read and written at once.
	// Optional: default 8.
	Parallelism int
}

func (c *WriterConfig) applyDefaults() {
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.MinInterval <= 0 {
		c.MinInterval = 2 * time.Second
	}
	if c.SettledInterval <= 0 {
		c.SettledInterval = 10 * time.Second
	}
	c.SettledInterval = max(c.SettledInterval, c.MinInterval)
	if c.Parallelism <= 0 {
		c.Parallelism = 8
	}
}

// Writer keeps the status of tracked objects of the management cluster
// current: each is read from Temporal about every MinInterval while it is
// not settled and every SettledInterval once it is, projected onto
// Fleet's status, and written only when the projection changed, at most
// once per MinInterval (changes in between are coalesced). It records
// Events on transitions and keeps Bundle mirrors. Run does the work;
// Track, Forget, SetCondition and Event may be called from any goroutine,
// before or while Run runs.
type Writer struct {
	cfg         WriterConfig
	started     time.Time // NewWriter's time: objects created since are new
	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder

	// listMu guards the cluster listing the groups share.
	listMu   sync.Mutex
	listed   []protocol.ClusterRecord
	listedAt time.Time

	mu      sync.Mutex
	entries map[key]*entry
	// forgotten are refs whose mirrors Run deletes.
	forgotten []Ref
	wake      chan struct{}
}

// entry is the Writer's state of one tracked object.
type entry struct {
	ref Ref
	// specGen is Flotilla's spec generation for ref.Generation, read by
	// the first query that started after Track reported that generation
	// (0: not read yet); specGenOf is the generation it is for.
	specGen, specGenOf int64
	overrides          map[string]Condition
	busy               bool
	due                time.Time
	// changes counts Track and SetCondition calls that make the entry due
	// at once.
	changes, seen int
	// written is the JSON of the status last written (or found on the
	// object when first read); loaded says it was read.
	written   []byte
	conds     []Condition
	loaded    bool
	lastWrite time.Time
	// obs is the last observation (events); last Flotilla's last status.
	obs  *Observation
	last *status.GitRepo
	// mirrors is the status JSON last written per mirror name.
	mirrors     map[string][]byte
	mirrorWrite time.Time
}

// NewWriter returns a Writer; it does nothing until Run.
func NewWriter(cfg WriterConfig) *Writer {
	cfg.applyDefaults()
	w := &Writer{cfg: cfg, entries: map[key]*entry{}, wake: make(chan struct{}, 1), started: time.Now()}
	if cfg.Kube != nil {
		w.broadcaster = record.NewBroadcaster()
		w.recorder = w.broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "flotilla"})
	}
	return w
}

// newEntry adds the entry of ref, replacing any of its name. An object
// created since this Writer started begins from an empty observation, so
// its first one is news (a GitRepo refused by a Policy before its status
// was first read still gets its PolicyViolation event); objects that were
// there before begin from none: a restart or a leader change repeats no
// events. Called with mu held.
func (w *Writer) newEntry(ref Ref) *entry {
	e := &entry{ref: ref, overrides: map[string]Condition{}}
	if ref.Created.After(w.started) {
		empty := Observe(status.GitRepo{})
		e.obs = &empty
	}
	w.entries[ref.key()] = e
	return e
}

// Track starts following ref, or updates its generation and UID. Call it
// after the object's spec was applied to Flotilla: Ready then waits for a
// rollout of that spec. A new generation or UID is read at once.
func (w *Writer) Track(ref Ref) {
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.entries[ref.key()]
	if !ok || e.ref.UID != ref.UID {
		// Another object of that name: start afresh (a read of the old
		// one in flight finds itself replaced and writes nothing).
		e = w.newEntry(ref)
	}
	if e.ref.Generation != ref.Generation || !ok {
		e.changes++
		w.poke()
	}
	e.ref = ref
}

// Forget stops following ref and deletes its Bundle mirrors.
func (w *Writer) Forget(ref Ref) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.entries, ref.key())
	if ref.Kind == KindGitRepo || ref.Kind == KindHelmOp {
		w.forgotten = append(w.forgotten, ref)
		w.poke()
	}
}

// SetCondition sets a condition only the management controller knows of
// (e.g. Accepted=False, reason and message, for a refused spec); it
// replaces the projected condition of that type until set again. A
// condition with an empty Status removes the override.
func (w *Writer) SetCondition(ref Ref, cond Condition) {
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.entries[ref.key()]
	if !ok || ref.UID != "" && e.ref.UID != ref.UID {
		e = w.newEntry(ref)
	}
	// A refused generation is never tracked: the status still names it.
	e.ref.Generation = max(e.ref.Generation, ref.Generation)
	if cond.Status == "" {
		delete(e.overrides, cond.Type)
	} else {
		e.overrides[cond.Type] = cond
	}
	e.changes++
	w.poke()
}

// Event records a Kubernetes Event about ref (eventType is
// corev1.EventTypeNormal or corev1.EventTypeWarning). The message must
// not hold secrets.
func (w *Writer) Event(ref Ref, eventType, reason, message string) {
	if w.recorder == nil {
		return
	}
	w.recorder.Event(objectReference(ref), eventType, reason, message)
}

func objectReference(ref Ref) *corev1.ObjectReference {
	return &corev1.ObjectReference{APIVersion: APIVersion, Kind: ref.Kind, Namespace: ref.Namespace, Name: ref.Name, UID: ref.UID}
}

func (w *Writer) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Run reads, projects and writes until ctx ends; it returns nil then.
func (w *Writer) Run(ctx context.Context) error {
	if w.broadcaster != nil {
		w.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: w.cfg.Kube.CoreV1().Events("")})
		defer w.broadcaster.Shutdown()
	}
	tick := time.NewTicker(max(w.cfg.MinInterval/4, 50*time.Millisecond))
	defer tick.Stop()
	sem := make(chan struct{}, w.cfg.Parallelism)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		for _, job := range w.dueJobs(time.Now()) {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return nil
			}
			wg.Go(func() {
				defer func() { <-sem }()
				job(ctx)
			})
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		case <-w.wake:
		}
	}
}

// dueJobs marks the entries due at now busy and returns their work, and
// the mirror deletions of forgotten refs.
func (w *Writer) dueJobs(now time.Time) []func(context.Context) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var jobs []func(context.Context)
	for _, ref := range w.forgotten {
		jobs = append(jobs, func(ctx context.Context) { w.deleteMirrors(ctx, ref) })
	}
	w.forgotten = nil
	for _, e := range w.entries {
		if e.busy || now.Before(e.due) && e.changes == e.seen || e.ref.Name == "" {
			continue
		}
		e.busy = true
		jobs = append(jobs, func(ctx context.Context) { w.process(ctx, e) })
	}
	return jobs
}
