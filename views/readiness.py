"""Readiness: is this fleet ready for production traffic? A checklist judged from the store where it can be."""
import streamlit as st

from finops.ops import readiness
from views._shared import can, current_access, cursor, query, stop_if_store_empty

STATUS = {"pass": ":green-badge[:material/check: from the store]", "fail": ":red-badge[:material/close: not yet]",
          "partial": ":orange-badge[:material/rule: partly]", "manual": ":gray-badge[:material/person: a person ticks]"}

st.title("Production readiness")
st.caption("Before a model takes production traffic: load tested, sized with headroom, watched, alerted on, "
           "released with a canary and a way back, behind authentication and rate limits. Items marked 'from the "
           "store' are judged from the logs, load tests and settings in this store; a person ticks the others.")
stop_if_store_empty("the readiness checklist")
con = cursor()
check = query(readiness.checklist)
scoped = current_access().scoped        # the evidence adds up every tenant's traffic (peak hours, fields)
if scoped:
    st.info("The evidence behind each item adds up every tenant's traffic; your login sees only some tenants, so "
            "it is not shown. The items and their status are the fleet's.", icon=":material/lock:")
done = int(check["done"].sum())
by_store = int((check["done"] & (check["status"] == "pass")).sum())
# an item the store proves is done with its box unticked (the box is a person's confirmation): the count says so
st.progress(done / len(check), text=f"{done} of {len(check)} items done: {by_store} judged from the store, "
                                    f"{done - by_store} ticked by a person")
for category, items in check.groupby("category", sort=False):
    st.subheader(category)
    for item in items.itertuples(index=False):
        c1, c2 = st.columns([3, 2])
        with c1:
            ticked = st.checkbox(f"**{item.item}**", value=bool(item.ticked), key=f"ready_{item.id}",
                                 disabled=not can("edit_settings"), help="Tick when a person has confirmed it; the tick is saved in the store.")
            st.caption(item.requirement)
            if ticked != bool(item.ticked):
                readiness.tick(con, item.id, ticked)
                st.rerun()
        with c2:
            st.markdown(STATUS[item.status] + (f" · ticked {item.ticked_at}" if item.ticked else ""))
            if item.source == "store" and not scoped:
                st.caption(item.evidence)
