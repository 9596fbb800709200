// Swagger UI for stackbot's /openapi.json, from files stackbot serves itself (works offline).
window.addEventListener("load", function () {
  window.ui = SwaggerUIBundle({ url: "/openapi.json", dom_id: "#swagger-ui", deepLinking: true });
});
