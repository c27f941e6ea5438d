// /demo/inbox: mounts the widget for the user id and token typed in.
"use strict";
document.getElementById("demo").addEventListener("submit", (event) => {
  event.preventDefault();
  event.target.hidden = true;
  NotifydInbox.mount("#bell", {userId: document.getElementById("user").value,
                               token: document.getElementById("token").value});
});
