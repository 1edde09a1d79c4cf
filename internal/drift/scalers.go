package drift

import (
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// scalerIndex holds the HorizontalPodAutoscalers of each watched
// namespace, with a generation that changes with them.
type scalerIndex struct {
	mu  sync.Mutex
	gen map[string]int
	by  map[string][]Scaler
}

func newScalerIndex() *scalerIndex {
	return &scalerIndex{gen: map[string]int{}, by: map[string][]Scaler{}}
}

// set replaces namespace ns's autoscalers with those in objs.
func (s *scalerIndex) set(ns string, objs []any) {
	var list []Scaler
	for _, o := range objs {
		if u, ok := o.(*unstructured.Unstructured); ok {
			list = append(list, scalerOf(u))
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.by[ns] = list
	s.gen[ns]++
}

// get returns ns's generation and autoscalers.
func (s *scalerIndex) get(ns string) (int, []Scaler) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen[ns], s.by[ns]
}

// scalerOf reads an autoscaling/v2 HorizontalPodAutoscaler: minReplicas
// defaults to 1.
func scalerOf(u *unstructured.Unstructured) Scaler {
	kind, _, _ := unstructured.NestedString(u.Object, "spec", "scaleTargetRef", "kind")
	name, _, _ := unstructured.NestedString(u.Object, "spec", "scaleTargetRef", "name")
	lo, found, _ := unstructured.NestedInt64(u.Object, "spec", "minReplicas")
	if !found {
		lo = 1
	}
	hi, _, _ := unstructured.NestedInt64(u.Object, "spec", "maxReplicas")
	return Scaler{Namespace: u.GetNamespace(), Kind: kind, Name: name, Min: lo, Max: hi}
}
