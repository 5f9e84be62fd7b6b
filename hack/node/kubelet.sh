# shellcheck shell=bash
# containerd and the kubelet, in the node's mount namespace: their
# configuration, the kubelet's identity in the cluster, and their start.

# containerd_up starts containerd with two runtimes: runc (Debian's, built
# with libseccomp, so RuntimeDefault seccomp is enforced) and runsc.
# restrict_oom_score_adj: root here may lack CAP_SYS_RESOURCE, and then
# nothing can be given a negative OOM score (see tools/build.sh, gvisor).
containerd_up() {
	mkdir -p "${dir}/run" "${dir}/containerd"
	cat >"${dir}/runsc.toml" <<TOML
binary_name = "$(bin gvisor runsc)"
root = "${dir}/runsc"
TOML
	cat >"${dir}/containerd.toml" <<TOML
version = 3
root = "${dir}/containerd/root"
state = "${dir}/containerd/state"
[grpc]
  address = "${dir}/run/containerd.sock"
[ttrpc]
  address = "${dir}/run/containerd.sock.ttrpc"
[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "${pause_image}"
[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = "/usr/sbin/runc"
        SystemdCgroup = false
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runsc]
      runtime_type = "io.containerd.runsc.v1"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runsc.options]
        TypeUrl = "io.containerd.runsc.v1.options"
        ConfigPath = "${dir}/runsc.toml"
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "${dir}/cni"
TOML
	# The shims are found on PATH.
	PATH="$(bindir containerd):$(bindir gvisor):${PATH}" \
		start containerd "${in_node[@]}" "$(bin containerd containerd)" --config "${dir}/containerd.toml"
	local i
	for i in $(seq 1 100); do
		[[ -S "${dir}/run/containerd.sock" ]] && ctr version >/dev/null 2>&1 && break
		running containerd || { tail -20 "${dir}/logs/containerd.log" >&2; return 1; }
		sleep 0.2
	done
	import_images "${images_dir}/pause.tar" "${images_dir}/python.tar"
}

# kubelet_credentials gives the kubelet a node identity of its own
# (system:node:NAME), signed by the cluster's CA: the Node authorizer and
# NodeRestriction then limit it to its own node and pods.
kubelet_credentials() {
	local pki="${cache}/kwok/clusters/agentsandbox/pki" server
	server="$(kubectl config view --raw -o jsonpath='{.clusters[0].cluster.server}')"
	mkdir -p "${dir}/pki"
	if ! openssl x509 -checkend 3600 -noout -in "${dir}/pki/kubelet-client.crt" >/dev/null 2>&1 ||
		! openssl verify -CAfile "${pki}/ca.crt" "${dir}/pki/kubelet-client.crt" >/dev/null 2>&1; then
		openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -sha256 \
			-keyout "${dir}/pki/kubelet-client.key" -subj "/O=system:nodes/CN=system:node:${node}" \
			-out "${dir}/pki/kubelet-client.csr" 2>/dev/null
		openssl x509 -req -in "${dir}/pki/kubelet-client.csr" -CA "${pki}/ca.crt" -CAkey "${pki}/ca.key" \
			-CAcreateserial -days 30 -sha256 -out "${dir}/pki/kubelet-client.crt" 2>/dev/null
	fi
	cp "${pki}/ca.crt" "${dir}/pki/ca.crt"
	cat >"${dir}/kubelet.kubeconfig" <<YAML
apiVersion: v1
kind: Config
clusters: [{name: local, cluster: {server: "${server}", certificate-authority: "${dir}/pki/ca.crt"}}]
users: [{name: kubelet, user: {client-certificate: "${dir}/pki/kubelet-client.crt", client-key: "${dir}/pki/kubelet-client.key"}}]
contexts: [{name: kubelet, context: {cluster: local, user: kubelet}}]
current-context: kubelet
YAML
}

kubelet_up() {
	local group="${real_group}" taint_key="${real_taint}" taint_value=true
	if [[ "${role}" == demo ]]; then
		group=gvisor taint_key=agentsandbox.dev/runtime taint_value=gvisor
	fi
	# Anonymous requests are refused; the API server authenticates with the
	# cluster's client certificate, and what it may do is asked of the API
	# server (webhook), as on any production node.
	cat >"${dir}/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: ${node_ip}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: ${dir}/pki/ca.crt}
authorization: {mode: Webhook}
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://${dir}/run/containerd.sock
imageServiceEndpoint: unix://${dir}/run/containerd.sock
podLogsDir: ${dir}/pod-logs
resolvConf: ""
serializeImagePulls: false
registerWithTaints: [{key: ${taint_key}, value: "${taint_value}", effect: NoSchedule}]
evictionHard: {memory.available: 100Mi, nodefs.available: 2%, imagefs.available: 2%}
# Every pod gets at most this many processes and threads (its cgroup's
# pids.max), so a fork bomb in one sandbox exhausts its own limit, not the
# node's. Under gVisor the sentry's threads and its stub processes count.
podPidsLimit: ${pod_pids_limit}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
YAML
	PATH="$(bindir containerd):${PATH}" start kubelet "${in_node[@]}" "$(bin kube kubelet)" \
		--config "${dir}/kubelet.yaml" --kubeconfig "${dir}/kubelet.kubeconfig" \
		--root-dir "${dir}/kubelet" --cert-dir "${dir}/pki" \
		--hostname-override "${node}" --node-ip "${node_ip}" --node-labels "${group_label}=${group}"
	local i
	for i in $(seq 1 120); do
		kubectl get node "${node}" >/dev/null 2>&1 && break
		running kubelet || { tail -20 "${dir}/logs/kubelet.log" >&2; return 1; }
		sleep 0.5
	done
	# kube-router reads the node's pod range; nothing allocates one here.
	kubectl patch node "${node}" --type merge \
		-p "{\"spec\":{\"podCIDR\":\"${pod_cidr}\",\"podCIDRs\":[\"${pod_cidr}\"]}}" >/dev/null
	kubectl wait --for condition=Ready --timeout 120s "node/${node}" >/dev/null
}
