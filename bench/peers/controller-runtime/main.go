// A controller-runtime reconciler that keeps my-config at the course's
// desired data: what a Go learner would write with kubebuilder instead of the
// course's hand-written informer, queue and workers. The bench's peer
// `cargo maint bench --peer controller-runtime` (docs/bench.md).
//
// Written the way controller-runtime's book shows, with three choices a careful
// user makes and each said where it is made: the cache holds my-config alone
// (a field selector, like my-controller's), a kick at start (an absent object
// sends no event), and no client-side rate limit (QPS -1, as the course peer's
// patch: the bench's back-to-back rounds would otherwise be throttled).
package main

import (
	"context"
	"maps"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// The ConfigMap kept: my-config, or $MY_CONTROLLER_NAME when set (on a
// cluster the kit did not make, the bench's sides share one namespace, a
// name each).
var name = "my-config"

var desired = map[string]string{"app.conf": "env=prod\nreplicas=3"}

type reconciler struct{ client.Client }

// Reconcile reads my-config from the cache: absent → create, drifted → update,
// right → nothing.
func (r *reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	var cm corev1.ConfigMap
	err := r.Get(ctx, req.NamespacedName, &cm)
	if apierrors.IsNotFound(err) {
		fresh := corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: req.Namespace, Name: req.Name},
			Data:       maps.Clone(desired),
		}
		if err := r.Create(ctx, &fresh); err != nil {
			return ctrl.Result{}, client.IgnoreAlreadyExists(err)
		}
		log.Info("created")
		return ctrl.Result{}, nil
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if maps.Equal(cm.Data, desired) {
		return ctrl.Result{}, nil
	}
	cm.Data = maps.Clone(desired)
	if err := r.Update(ctx, &cm); err != nil {
		return ctrl.Result{}, err
	}
	log.Info("corrected")
	return ctrl.Result{}, nil
}

func main() {
	ctrl.SetLogger(zap.New())
	log := ctrl.Log.WithName("my-config")

	if n := os.Getenv("MY_CONTROLLER_NAME"); n != "" {
		name = n
	}
	config := ctrl.GetConfigOrDie()
	config.QPS = -1
	// The namespace of the kubeconfig's context, "default" when it names none
	// (the bench gives each side a my-config in a namespace of its own).
	loading := clientcmd.NewDefaultClientConfigLoadingRules()
	namespace, _, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(loading, nil).Namespace()
	if err != nil {
		log.Error(err, "cannot read the namespace from the kubeconfig")
		os.Exit(1)
	}
	resync := 30 * time.Second // the course's resync
	mgr, err := ctrl.NewManager(config, ctrl.Options{
		Cache: cache.Options{
			SyncPeriod: &resync,
			ByObject: map[client.Object]cache.ByObject{
				&corev1.ConfigMap{}: {
					Namespaces: map[string]cache.Config{namespace: {}},
					Field:      fields.OneTermEqualSelector("metadata.name", name),
				},
			},
		},
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		log.Error(err, "cannot make the manager")
		os.Exit(1)
	}

	kick := make(chan event.GenericEvent, 1)
	kick <- event.GenericEvent{Object: &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
	}}
	err = ctrl.NewControllerManagedBy(mgr).
		Named("my-config").
		For(&corev1.ConfigMap{}).
		WatchesRawSource(source.Channel(kick, &handler.EnqueueRequestForObject{})).
		Complete(&reconciler{mgr.GetClient()})
	if err != nil {
		log.Error(err, "cannot make the controller")
		os.Exit(1)
	}
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "stopped")
		os.Exit(1)
	}
}
