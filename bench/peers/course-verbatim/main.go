package main

import (
    "context"
    "flag"
    "os"
    "os/signal"
    "reflect"
    "syscall"
    "time"

    corev1 "k8s.io/api/core/v1"
    apierrors "k8s.io/apimachinery/pkg/api/errors"
    metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
    "k8s.io/apimachinery/pkg/util/wait"
    "k8s.io/client-go/informers"
    "k8s.io/client-go/kubernetes"
    corelisters "k8s.io/client-go/listers/core/v1"
    "k8s.io/client-go/tools/cache"
    "k8s.io/client-go/tools/clientcmd"
    "k8s.io/client-go/util/workqueue"
    "k8s.io/klog/v2"
)

// ========== 期望状态:这个 controller 唯一的"业务知识" ==========
const (
    targetNamespace = "default"
    targetName      = "my-config"
)

var desiredData = map[string]string{
    "app.conf": "env=prod\nreplicas=3",
}

type Controller struct {
    clientset kubernetes.Interface
    cmLister  corelisters.ConfigMapLister // 读:走缓存(教学文档 6.3)
    cmSynced  cache.InformerSynced
    queue     workqueue.TypedRateLimitingInterface[string]
}

func main() {
    klog.InitFlags(nil)
    kubeconfig := flag.String("kubeconfig", "", "kubeconfig 路径")
    flag.Parse()

    config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
    if err != nil {
        klog.Fatalf("加载 kubeconfig 失败: %v", err)
    }
    clientset, err := kubernetes.NewForConfig(config)
    if err != nil {
        klog.Fatalf("创建 clientset 失败: %v", err)
    }

    ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
    defer stop()

    // 只看 default;resync=30s:方便你亲眼看到"周期性对账"(生产里通常是小时级)
    factory := informers.NewSharedInformerFactoryWithOptions(clientset, 30*time.Second,
        informers.WithNamespace(targetNamespace))
    cmInformer := factory.Core().V1().ConfigMaps()
    informer := cmInformer.Informer()

    c := &Controller{
        clientset: clientset,
        cmLister:  cmInformer.Lister(),
        cmSynced:  informer.HasSynced,
        queue:     workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
    }

    // 固定动作①:回调只放 key
    informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
        AddFunc:    func(obj interface{}) { c.enqueue(obj) },
        UpdateFunc: func(old, new interface{}) { c.enqueue(new) },
        DeleteFunc: func(obj interface{}) { c.enqueue(obj) },
    })

    factory.Start(ctx.Done())

    // 固定动作②:缓存不同步完,worker 绝不开工
    if !cache.WaitForCacheSync(ctx.Done(), c.cmSynced) {
        klog.Fatal("缓存同步超时")
    }
    klog.Info("缓存同步完成")

    // ★ 主动踢一脚:my-config 可能压根不存在,不存在就永远不会有它的事件,
    //   reconcile 就永远跑不到它。启动时手动入队,保证对账至少跑一次。
    c.queue.Add(targetNamespace + "/" + targetName)

    for i := 0; i < 2; i++ {
        go wait.UntilWithContext(ctx, c.runWorker, time.Second)
    }

    <-ctx.Done()
    klog.Info("收到退出信号,停机")
    c.queue.ShutDown()
}

func (c *Controller) enqueue(obj interface{}) {
    key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
    if err == nil {
        c.queue.Add(key)
    }
}

// ---------- worker 骨架:和第三步一模一样 ----------

func (c *Controller) runWorker(ctx context.Context) {
    for c.processNextItem(ctx) {
    }
}

func (c *Controller) processNextItem(ctx context.Context) bool {
    key, quit := c.queue.Get()
    if quit {
        return false
    }
    defer c.queue.Done(key)

    err := c.reconcile(ctx, key) // ← 唯一的业务逻辑在这

    switch {
    case err == nil:
        c.queue.Forget(key)
    case c.queue.NumRequeues(key) < 5:
        klog.Infof("对账失败,稍后重试 (%s): %v", key, err)
        c.queue.AddRateLimited(key)
    default:
        klog.Errorf("对账连挂 5 次,放弃 (%s): %v", key, err)
        c.queue.Forget(key)
    }
    return true
}

// ---------- reconcile:你 90% 的工作量(以后)都在这种函数里 ----------

func (c *Controller) reconcile(ctx context.Context, key string) error {
    namespace, name, err := cache.SplitMetaNamespaceKey(key)
    if err != nil {
        return err
    }
    // 不是我们的目标对象,看一眼就放行(别的事件也会进来,这很正常)
    if namespace != targetNamespace || name != targetName {
        return nil
    }

    // 读:走缓存,不问 API Server
    cm, err := c.cmLister.ConfigMaps(namespace).Get(name)
    switch {
    case apierrors.IsNotFound(err):
        // 期望存在,实际不存在 → 创建(这就是"自愈")
        klog.Infof("%s 不存在,创建中...", key)
        desired := &corev1.ConfigMap{
            ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
            Data:       desiredData,
        }
        _, err = c.clientset.CoreV1().ConfigMaps(namespace).Create(ctx, desired, metav1.CreateOptions{})
        return err
    case err != nil:
        return err
    }

    // 存在 → 对比内容,不一致才纠正(这就是"补差")
    if reflect.DeepEqual(cm.Data, desiredData) {
        klog.V(1).Infof("%s 与期望一致,无需动作", key)
        return nil // ★ 一致就什么都不写 —— 防 hot loop 的关键
    }
    klog.Infof("%s 内容偏离期望,纠正中...", key)
    cmCopy := cm.DeepCopy() // ★ 缓存里的对象是共享的,改前必须 DeepCopy!
    cmCopy.Data = desiredData
    _, err = c.clientset.CoreV1().ConfigMaps(namespace).Update(ctx, cmCopy, metav1.UpdateOptions{})
    return err
}
