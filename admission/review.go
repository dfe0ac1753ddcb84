package admission

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	vcbatch "volcano.sh/apis/pkg/apis/batch/v1alpha1"
)

// maxBody bounds an AdmissionReview read (the API server's own request
// limit is 3 MiB for objects; a review carries the object and oldObject).
const maxBody = 7 << 20

// Handler serves the mutating (/mutate) and validating (/validate)
// endpoints with a Policy.
type Handler struct {
	Policy *Policy
}

// ServeHTTP routes /mutate and /validate.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/mutate":
		h.serve(w, r, h.mutate)
	case "/validate":
		h.serve(w, r, h.validate)
	default:
		http.NotFound(w, r)
	}
}

func (h *Handler) serve(w http.ResponseWriter, r *http.Request, decide func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST an AdmissionReview", http.StatusMethodNotAllowed)
		return
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		http.Error(w, fmt.Sprintf("Content-Type %q: want application/json", ct), http.StatusUnsupportedMediaType)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil || len(body) > maxBody {
		http.Error(w, "cannot read the AdmissionReview (or over 7 MiB)", http.StatusBadRequest)
		return
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil || review.Request == nil {
		http.Error(w, fmt.Sprintf("not an AdmissionReview with a request: %v", err), http.StatusBadRequest)
		return
	}
	resp := decide(review.Request)
	resp.UID = review.Request.UID
	out, err := json.Marshal(admissionv1.AdmissionReview{TypeMeta: review.TypeMeta, Response: resp})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
}

func allow() *admissionv1.AdmissionResponse { return &admissionv1.AdmissionResponse{Allowed: true} }

func deny(code int32, msg string) *admissionv1.AdmissionResponse {
	reason := metav1.StatusReasonInvalid
	if code == http.StatusBadRequest {
		reason = metav1.StatusReasonBadRequest
	}
	return &admissionv1.AdmissionResponse{Allowed: false, Result: &metav1.Status{
		Status: metav1.StatusFailure, Code: code, Reason: reason, Message: msg}}
}

var podResource = metav1.GroupVersionResource{Version: "v1", Resource: "pods"}

// mutate patches pods being created.
func (h *Handler) mutate(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if req.Resource != podResource || req.SubResource != "" || req.Operation != admissionv1.Create {
		return allow()
	}
	var pod v1.Pod
	if err := json.Unmarshal(req.Object.Raw, &pod); err != nil {
		return deny(http.StatusBadRequest, "decode the pod: "+err.Error())
	}
	changes, err := h.Policy.Mutate(&pod)
	if err != nil {
		// Fail closed: a pod admitted unchanged could see every card.
		return deny(http.StatusInternalServerError, "vshare admission: "+err.Error())
	}
	if len(changes) == 0 {
		return allow()
	}
	type op struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value any    `json:"value"`
	}
	ops := make([]op, 0, len(changes))
	for _, c := range changes {
		ops = append(ops, op{Op: c.Op, Path: c.Path, Value: c.Value})
		klog.V(2).InfoS("Mutating pod", "namespace", req.Namespace, "pod", podName(&pod), "path", c.Path, "why", c.Why)
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		return deny(http.StatusInternalServerError, "vshare admission: "+err.Error())
	}
	pt := admissionv1.PatchTypeJSONPatch
	return &admissionv1.AdmissionResponse{Allowed: true, Patch: patch, PatchType: &pt}
}

func podName(p *v1.Pod) string {
	if p.Name != "" {
		return p.Name
	}
	return p.GenerateName + "*"
}

// template is one pod spec inside an admitted object, with where it sits.
type template struct {
	field string
	meta  metav1.ObjectMeta
	spec  v1.PodSpec
}

// templates decodes the pod specs of the kinds the validating webhook is
// registered for: pods, and the pod templates of the workload kinds, so that
// a bad request is refused at `kubectl apply` of a Deployment or a Volcano
// Job, not later as events of a controller that cannot create its pods.
func templates(req *admissionv1.AdmissionRequest) ([]template, error) {
	raw := req.Object.Raw
	var ts []template
	add := func(field string, t v1.PodTemplateSpec) {
		ts = append(ts, template{field: field, meta: t.ObjectMeta, spec: t.Spec})
	}
	var err error
	switch req.Kind.Group + "/" + req.Kind.Kind {
	case "/Pod":
		var o v1.Pod
		if err = json.Unmarshal(raw, &o); err == nil {
			ts = append(ts, template{field: "spec", meta: o.ObjectMeta, spec: o.Spec})
		}
	case "apps/Deployment":
		var o appsv1.Deployment
		if err = json.Unmarshal(raw, &o); err == nil {
			add("spec.template", o.Spec.Template)
		}
	case "apps/StatefulSet":
		var o appsv1.StatefulSet
		if err = json.Unmarshal(raw, &o); err == nil {
			add("spec.template", o.Spec.Template)
		}
	case "apps/DaemonSet":
		var o appsv1.DaemonSet
		if err = json.Unmarshal(raw, &o); err == nil {
			add("spec.template", o.Spec.Template)
		}
	case "apps/ReplicaSet":
		var o appsv1.ReplicaSet
		if err = json.Unmarshal(raw, &o); err == nil {
			add("spec.template", o.Spec.Template)
		}
	case "batch/Job":
		var o batchv1.Job
		if err = json.Unmarshal(raw, &o); err == nil {
			add("spec.template", o.Spec.Template)
		}
	case "batch/CronJob":
		var o batchv1.CronJob
		if err = json.Unmarshal(raw, &o); err == nil {
			add("spec.jobTemplate.spec.template", o.Spec.JobTemplate.Spec.Template)
		}
	case "batch.volcano.sh/Job":
		var o vcbatch.Job
		if err = json.Unmarshal(raw, &o); err == nil {
			for i, t := range o.Spec.Tasks {
				add(fmt.Sprintf("spec.tasks[%d].template", i), t.Template)
			}
		}
	default:
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("decode the %s: %w", req.Kind.Kind, err)
	}
	return ts, nil
}

// validate refuses pods and workloads whose pods could not keep a share.
func (h *Handler) validate(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return allow()
	}
	if req.SubResource != "" {
		return allow()
	}
	ts, err := templates(req)
	if err != nil {
		return deny(http.StatusBadRequest, err.Error())
	}
	var msgs []string
	for _, t := range ts {
		pod := &v1.Pod{ObjectMeta: t.meta, Spec: t.spec}
		pod.Namespace = req.Namespace
		for _, r := range h.Policy.Validate(pod, t.field+specField(t.field)) {
			msgs = append(msgs, r.Error())
		}
	}
	if len(msgs) == 0 {
		return allow()
	}
	klog.V(2).InfoS("Refusing", "kind", req.Kind.Kind, "namespace", req.Namespace, "name", req.Name, "reasons", msgs)
	return deny(http.StatusUnprocessableEntity, "vshare admission: "+strings.Join(msgs, "; "))
}

// specField is the suffix from a template's field to its pod spec.
func specField(field string) string {
	if field == "spec" {
		return ""
	}
	return ".spec"
}
