# The self-test probe: runs as bash inside one sandbox and prints one line per
# observation. It is never told the canary values it is tested against; the
# worker looks for them in this output.
# $1: the canary listener on the host's loopback (HOST:PORT); $2...: canary
# files the worker wrote on the host.
canary=$1
shift

# network_namespace: interfaces and routes this sandbox sees.
printf 'netdev'
while read -r l; do case $l in *:*) printf ' %s' "${l%%:*}" ;; esac; done </proc/net/dev
echo
n=0
while read -r _; do n=$((n + 1)); done </proc/net/route
echo "route $((n - 1))"

# no_direct_egress: a direct connection to the worker's canary listener.
if (exec 3<>"/dev/tcp/${canary%:*}/${canary##*:}") 2>/dev/null; then echo "direct connected"; else echo "direct failed"; fi

# egress_refuses_private: what the sandbox's proxy answers for private targets.
proxy=${HTTP_PROXY:-${http_proxy:-}}
proxy=${proxy#http://}
proxy=${proxy%%/*}
ask() { # ask KIND TARGET REQUEST-LINE
	if ! exec 3<>"/dev/tcp/${proxy%:*}/${proxy##*:}"; then echo "proxy $1 $2 unreachable"; return; fi
	printf '%s\r\nHost: %s\r\nConnection: close\r\n\r\n' "$3" "$2" >&3
	local status=none
	read -r -t 3 _ status _ <&3 || true
	exec 3>&-
	echo "proxy $1 $2 ${status:-none}"
}
if [ -z "$proxy" ]; then
	echo "proxy none"
else
	ask http "$canary" "GET http://$canary/ HTTP/1.1"
	ask http 10.0.0.1:80 "GET http://10.0.0.1/ HTTP/1.1"
	ask http 169.254.169.254:80 "GET http://169.254.169.254/latest/meta-data/ HTTP/1.1"
	ask connect 169.254.169.254:443 "CONNECT 169.254.169.254:443 HTTP/1.1"
fi 2>/dev/null

# clean_env: every environment this sandbox can read (the worker searches it).
echo "env-begin"
env
n=0
for f in /proc/[0-9]*/environ; do
	if [ -r "$f" ] && tr '\0' '\n' 2>/dev/null <"$f"; then n=$((n + 1)); fi
done 2>/dev/null
echo
echo "env-end"
echo "environ_read $n"

# credentials_brokered: the probe secret's placeholder, every process's
# command line (the worker searches them, and the environments above, for
# the value), the trust bundle (certificates, private keys,
# SSL_CERT_FILE), an HTTPS request with the placeholder to the secret's
# host (the worker's canary: what it received is judged there), and what
# the proxy answers to the placeholder sent to a host the secret is not
# for.
if [ -n "${PROBE_SECRET:-}" ]; then
	echo "broker_env $PROBE_SECRET"
	for f in /proc/[0-9]*/cmdline; do
		[ -r "$f" ] && printf 'broker_cmdline %s\n' "$(tr '\0\n' '  ' <"$f")"
	done
	if [ -n "${PROBE_INIT:-}" ] && got=$("$PROBE_INIT" __sandbox-fetch "https://$PROBE_SECRET_HOST/" PROBE_SECRET 2>&1); then
		echo "broker_fetch $got"
	else
		echo "broker_fetch failed ${got//$'\n'/ }"
	fi
	certs=0 keys=0
	while IFS= read -r l; do
		case $l in *'BEGIN CERTIFICATE'*) certs=$((certs + 1)) ;; *'PRIVATE KEY'*) keys=$((keys + 1)) ;; esac
	done </etc/ssl/certs/ca-certificates.crt
	echo "broker_bundle $certs $keys ${SSL_CERT_FILE:-unset}"
	if [ -n "$proxy" ] && exec 3<>"/dev/tcp/${proxy%:*}/${proxy##*:}"; then
		printf 'GET http://credentials-probe-other.invalid/ HTTP/1.1\r\nHost: credentials-probe-other.invalid\r\nX-Probe: %s\r\nConnection: close\r\n\r\n' "$PROBE_SECRET" >&3
		status=none refused=none
		read -r -t 3 _ status _ <&3 || true
		while IFS= read -r -t 3 l <&3; do
			l=${l%$'\r'}
			[ -z "$l" ] && break
			case ${l,,} in x-egress-refused:*) refused=${l#*: } ;; esac
		done
		exec 3>&-
		echo "broker_refused $status $refused"
	else
		echo "broker_refused unreachable"
	fi
fi 2>/dev/null

# no_host_files: host paths that must not be there (empty directories are).
# In an image sandbox (PROBE_IMAGE) these are the image's own: only the
# canaries are looked for.
[ -n "${PROBE_IMAGE:-}" ] || for p in /home /root /run /var/lib; do
	if [ -d "$p" ]; then
		if ! c=$(ls -A "$p" 2>/dev/null); then echo "hostfile $p unreadable"; elif [ -n "$c" ]; then echo "hostfile $p not-empty"; fi
	elif [ -e "$p" ]; then echo "hostfile $p present"; fi
done
hostpaths=(/etc/shadow /etc/ssh)
[ -z "${PROBE_IMAGE:-}" ] || hostpaths=()
for p in "${hostpaths[@]}" /.sandbox "$@"; do
	if [ -e "$p" ]; then echo "hostfile $p present"; elif [ -e "${p%/*}" ] && [ "${p%/*}" != "" ]; then
		case $p in /etc/*) ;; *) echo "hostfile ${p%/*} present" ;; esac
	fi
done
echo "hostfiles checked"

# no_capabilities, seccomp, user namespace.
while read -r k v; do case $k in Cap*: | NoNewPrivs: | Seccomp:) echo "status ${k%:} $v" ;; esac; done </proc/self/status
while read -r a b c; do echo "uid_map $a $b $c"; done </proc/self/uid_map
unshare -U true 2>/dev/null
echo "unshare $?"

# limits: whether a UDP socket opens (on a cgroup v1 host, which cannot
# charge its buffers, the seccomp filter refuses it).
if (exec 3<>/dev/udp/127.0.0.1/9) 2>/dev/null; then echo "udp opened"; else echo "udp refused"; fi

# limits: the cgroup this sandbox sees, then (last: it exhausts the pids
# limit) how many processes it can start.
while read -r l; do echo "cgroup $l"; done </proc/self/cgroup
echo "fork-begin"
sh -c 'i=0; while [ $i -lt 64 ]; do sleep 30 </dev/null >/dev/null 2>&1 & i=$((i + 1)); echo "spawned $i"; done' 2>/dev/null
echo "end"
