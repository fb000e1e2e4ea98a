# gpuwerk: says at login whether Docker runs inside this instance (docs/docker-inside.md).
case $- in
  *i*)
    case $(cat /run/gpuwerk/docker-inside 2>/dev/null || echo off) in
      privileged) echo "docker inside: privileged (this host is given to one tenant at a time)" ;;
      sysbox) echo "docker inside: sysbox" ;;
      *) echo "docker inside: off (the docker command says why)" ;;
    esac
    ;;
esac
