# shardcron on scratch: one static binary (CGO_ENABLED=0, time zones
# embedded), CA certificates for etcd and https jobs, a non-root user, and
# /tmp and /data writable by it. Built by `make image` (deploy/docker/build.sh
# stages the context). Exec jobs need their programs in the image: build a
# derived image (docs/deploy.md).
FROM scratch
COPY rootfs/ /
COPY --chown=65532:65532 empty/ /data/
COPY binary /usr/local/bin/shardcron
USER 65532:65532
WORKDIR /data
ENV HOME=/data
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/shardcron"]
CMD ["server"]
