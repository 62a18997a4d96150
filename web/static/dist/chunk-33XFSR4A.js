import{a}from"./chunk-ZGPVPJFF.js";import"./chunk-SHDSSOQO.js";import"./chunk-YVSA2ZOB.js";export{a as expressionInterpreter};
