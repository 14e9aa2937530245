# etcd on scratch, built from go.etcd.io/etcd/server/v3 (the version in
# go.mod) by `make etcd-image`, for the compose file and the end-to-end suite.
# Any etcd 3.5+ image works instead (ETCD_IMAGE=...).
FROM scratch
COPY rootfs/ /
COPY --chown=65532:65532 empty/ /var/lib/etcd/
COPY binary /usr/local/bin/etcd
USER 65532:65532
WORKDIR /var/lib/etcd
ENV ETCD_DATA_DIR=/var/lib/etcd/data
EXPOSE 2379 2380
ENTRYPOINT ["/usr/local/bin/etcd"]
