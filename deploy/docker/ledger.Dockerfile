# The end-to-end suite's ledger: a fencing-aware HTTP sink (e2e/ledger) in
# its own container. Test use only.
FROM scratch
COPY rootfs/ /
COPY binary /usr/local/bin/ledger
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/ledger"]
