# shellcheck shell=bash
# Local volumes on the node's disk: a workspace written before a stop is
# there after the start, on a new pod. The kubelet gives them the pod's
# fsGroup. A volume whose claim is deleted (its sandbox deleted) is wiped
# and offered again by the recycler, which up starts beside the kubelet.
#
# Each volume is a file system of its own, of its declared capacity: an
# ext4 image on the node's disk, loop-mounted in the node's mount
# namespace. A workspace declared 64Mi is then full (ENOSPC) at 64 MiB
# instead of filling the machine's disk, as a plain directory would let it.
# A claim binds the smallest volume that fits it, so the sizes follow what
# the tests (64Mi, 1Gi) and the demo's examples (5Gi) ask for; images are
# sparse, and without a journal, so an empty one costs next to nothing.

volume_mib() {
	local i="$1"
	if [[ "${role}" == demo ]]; then
		if ((i < 24)); then echo 5120; else echo 1024; fi
	elif ((i < 8)); then echo "${small_volume_mib}"; else echo 1024; fi
}
storage_class() { if [[ "${role}" == demo ]]; then echo standard; else echo "${storage_class_name}"; fi; }
volumes_up() {
	local class i
	class="$(storage_class)"
	enter_node
	if [[ "${role}" == demo ]]; then
		# The default class's kwok volumes could bind a claim the real node
		# cannot mount.
		local available
		available="$(kubectl get pv -l agentsandbox.dev/local-volume -o jsonpath='{range .items[?(@.status.phase=="Available")]}{.metadata.name}{" "}{end}')"
		# shellcheck disable=SC2086 # a list of names
		[[ -z "${available}" ]] || kubectl delete pv --wait=false ${available} >/dev/null
	else
		kubectl apply --server-side -f - >/dev/null <<YAML
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: ${class}}
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
reclaimPolicy: Retain
YAML
	fi
	mkdir -p "${dir}/volumes"
	for ((i = 0; i < volumes; i++)); do
		# A volume mounted already (up again on a running node) may hold a
		# workspace: it is left as it is.
		"${in_node[@]}" mountpoint -q "${dir}/volumes/node-${i}" 2>/dev/null || volume_make "node-${i}" "$(volume_mib "${i}")"
	done
	for ((i = 0; i < volumes; i++)); do
		volume_manifest "node-${i}" "${class}" "$(volume_mib "${i}")"
	done | kubectl apply --server-side -f - >/dev/null
	echo "${class}" >"${dir}/volumes/class"
	echo "${role}" >"${dir}/volumes/role"
}

# volume_make makes the volume NAME afresh, a file system of MIB MiB, and
# mounts it where its PersistentVolume points, in the node's mount
# namespace (the loop device goes when the mount does).
volume_make() {
	local name="$1" mib="$2" image="${dir}/volumes/$1.img" mnt="${dir}/volumes/$1"
	"${in_node[@]}" umount "${mnt}" 2>/dev/null || true
	rm -rf "${image}" "${mnt}"
	truncate -s "${mib}M" "${image}"
	mkfs.ext4 -q -F -O ^has_journal -m 0 "${image}"
	mkdir -p "${mnt}"
	"${in_node[@]}" mount -o loop "${image}" "${mnt}"
	"${in_node[@]}" rmdir "${mnt}/lost+found"
}

# volume_manifest prints the PersistentVolume NAME of CLASS, of MIB MiB.
volume_manifest() {
	local name="$1" class="$2" mib="$3"
	cat <<YAML
apiVersion: v1
kind: PersistentVolume
metadata:
  name: ${name}
  labels: {agentsandbox.dev/node-volume: "true"}
spec:
  storageClassName: ${class}
  capacity: {storage: ${mib}Mi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  local: {path: ${dir}/volumes/${name}}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [${node}]}]
---
YAML
}

# recycle_volumes runs until killed: every two seconds it wipes each
# Released volume (its sandbox's workspace is gone with the sandbox: the
# file system is made anew) and offers it again, as
# sig-storage-local-static-provisioner does for real clusters, and puts
# back a volume that went missing. No workspace reaches another sandbox.
recycle_volumes() {
	local class phases i name
	role="$(cat "${dir}/volumes/role" 2>/dev/null)" || role="test"
	enter_node
	while sleep 2; do
		class="$(cat "${dir}/volumes/class" 2>/dev/null)" || continue
		phases=" $(kubectl get pv -l agentsandbox.dev/node-volume \
			-o jsonpath='{range .items[*]}{.metadata.name}={.status.phase}{" "}{end}' 2>/dev/null) " || continue
		for ((i = 0; i < volumes; i++)); do
			name="node-${i}"
			case "${phases}" in
			*" ${name}=Released "*) kubectl delete pv "${name}" --wait=true >/dev/null 2>&1 || continue ;;
			*" ${name}="*) continue ;;
			esac
			volume_make "${name}" "$(volume_mib "${i}")" || continue
			volume_manifest "${name}" "${class}" "$(volume_mib "${i}")" | kubectl apply --server-side -f - >/dev/null 2>&1 || true
		done
	done
}
