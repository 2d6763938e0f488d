# tests/layers.mk -- `make layers`: tools/layer-check.py (the order of layers,
# tools/layers.tsv; docs/design.md, "Layers") on the objects of the release,
# debug and stats builds.  tests/suite_layers.sh runs the same check in
# `make test`.  tools/layer-check.py --update-doc regenerates the picture in
# docs/design.md after an edit of the table.
.PHONY: layers
layers: $(REL_OBJS) $(DBG_OBJS) $(STA_OBJS)
	/usr/bin/python3 tools/layer-check.py $(BUILD)/obj $(BUILD)/debug/obj $(BUILD)/stats/obj
