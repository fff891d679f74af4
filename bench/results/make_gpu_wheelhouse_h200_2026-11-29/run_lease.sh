#!/usr/bin/env bash
# Receive the wheelhouse parts (.wh/pNN), and once all are in: join, check, unpack to /tmp/wheelhouse and run
# `make gpu WHEELHOUSE=/tmp/wheelhouse` detached in a copy of the checkout; `wait S` prints how far it got.
mkdir -p /tmp/whp
for f in .wh/p*/*; do [ -f "$f" ] && cp -f "$f" /tmp/whp/; done
have=$(find /tmp/whp -name 'wh.tar.*' | wc -l)
echo "wheelhouse parts: $have of ${PARTS:-20}"
case ${1:-} in
  go)
    [ "$have" -eq "${PARTS:-20}" ] || exit 0
    if [ ! -f /tmp/wh.ok ]; then
      [ "$(cat /tmp/whp/wh.tar.* | sha256sum | cut -d' ' -f1)" = "$(cat /tmp/whp/all.sha256)" ] || { echo "checksum mismatch"; exit 1; }
      cat /tmp/whp/wh.tar.* | tar -C /tmp -xf - && touch /tmp/wh.ok && rm -f /tmp/whp/wh.tar.*
    fi
    du -sh /tmp/wheelhouse; python3 -m pip --version; which python3
    rm -rf /tmp/whrepo && mkdir -p /tmp/whrepo && tar --exclude=./.wh --exclude=./.git -cf - . | tar -C /tmp/whrepo -xf -
    cd /tmp/whrepo && date +%s > /tmp/makegpu.t0
    setsid bash -c 'make gpu WHEELHOUSE=/tmp/wheelhouse > /tmp/makegpu.log 2>&1; echo $? > /tmp/makegpu.rc; date +%s > /tmp/makegpu.t1' < /dev/null > /dev/null 2>&1 &
    ;;
  wait)
    end=$((SECONDS + ${2:-60}))
    while ((SECONDS < end)) && [ ! -f /tmp/makegpu.rc ]; do sleep 3; done
    echo "rc $(cat /tmp/makegpu.rc 2> /dev/null || echo running), $(($(cat /tmp/makegpu.t1 2> /dev/null || date +%s) - $(cat /tmp/makegpu.t0))) s"
    grep -v "^  \|Processing\|Requirement already" /tmp/makegpu.log | tail -40
    cp /tmp/makegpu.log "$OUT/" 2> /dev/null ;;
esac
